//! A real single-node Slurm with accounting for the tests that need one
//! (`scripts/slurm-test-cluster.sh`, from Debian's `slurmctld slurmd slurm-client munge
//! slurmdbd mariadb-server`, which `scripts/test.sh` installs; runs as root). Shared by the
//! `augur` end-to-end tests and the datasets crate's live sacct test.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The Debian packages the cluster is made of.
pub const INSTALL: &str =
    "apt-get install -y slurmctld slurmd slurm-client munge slurmdbd mariadb-server (scripts/test.sh does)";

const TOOLS: [&str; 8] = [
    "slurmctld",
    "slurmd",
    "slurmdbd",
    "munged",
    "mariadbd",
    "sbatch",
    "squeue",
    "sacct",
];

/// A running test cluster, stopped (by its pid files) when dropped.
pub struct Cluster {
    pub dir: tempfile::TempDir,
    script: PathBuf,
}

fn output(cmd: &mut Command) -> Output {
    cmd.output()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e} (is Slurm installed? {INSTALL})"))
}

impl Cluster {
    /// Starts the cluster. A missing Slurm tool fails the test with the install command:
    /// a test of the real Slurm never passes without one.
    pub fn start() -> Cluster {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/slurm-test-cluster.sh");
        for tool in TOOLS {
            let found = Command::new("sh")
                .args([
                    "-c",
                    &format!("PATH=\"$PATH:/usr/sbin:/sbin\"; command -v {tool}"),
                ])
                .output()
                .is_ok_and(|o| o.status.success());
            assert!(found, "`{tool}` is missing: {INSTALL}");
        }
        let dir = tempfile::Builder::new()
            .prefix("augur-slurm-")
            .tempdir_in("/tmp")
            .expect("temporary folder");
        let cluster = Cluster { dir, script };
        let out = output(
            Command::new("bash")
                .arg(&cluster.script)
                .arg("start")
                .arg(cluster.dir.path()),
        );
        assert!(
            out.status.success(),
            "slurm-test-cluster.sh start failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        cluster
    }

    /// The cluster's `slurm.conf` (`SLURM_CONF` for its client commands).
    pub fn conf(&self) -> PathBuf {
        self.dir.path().join("etc/slurm.conf")
    }

    /// A Slurm client command against this cluster; its output, or the test fails.
    pub fn run(&self, program: &str, args: &[&str]) -> String {
        let out = output(
            Command::new(program)
                .args(args)
                .env("SLURM_CONF", self.conf())
                .current_dir(self.dir.path()),
        );
        assert!(
            out.status.success(),
            "{program} {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// `sbatch --parsable ARGS`: the job id.
    pub fn sbatch(&self, args: &[&str]) -> String {
        let mut all = vec!["--parsable"];
        all.extend_from_slice(args);
        let id = self.run("sbatch", &all);
        id.trim().split(';').next().unwrap_or("").to_string()
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = Command::new("bash")
            .arg(&self.script)
            .arg("stop")
            .arg(self.dir.path())
            .status();
    }
}
