//! Line-based readers bound the line length: a multi-megabyte line without a newline fails
//! the read with an error naming the file, the line and the bound (memory stays bounded),
//! in CSV (Philly) and in SWF; the lines before it and normal files read as before.

use augur_datasets::{read_jobs, ReadOptions, TraceFormat};

const HEADER: &str = "timestamp,duration,num_gpus,gpu_time,cluster\n";
const ROW: &str = "2017-10-03 10:00:00,3600,4,14400,vc1\n";

fn philly_with(tail: &[u8]) -> tempfile::NamedTempFile {
    let f = tempfile::Builder::new().suffix(".csv").tempfile().unwrap();
    let mut text = format!("{HEADER}{ROW}{ROW}").into_bytes();
    text.extend_from_slice(tail);
    std::fs::write(f.path(), text).unwrap();
    f
}

#[test]
fn a_multi_megabyte_line_fails_naming_file_line_and_bound() {
    let long = vec![b'7'; 3_000_000];
    let f = philly_with(&long);
    let err = read_jobs(
        f.path(),
        Some(TraceFormat::Philly),
        &ReadOptions::default(),
        &mut |_| {},
    )
    .unwrap_err()
    .to_string();
    let name = f.path().file_name().unwrap().to_string_lossy().to_string();
    assert!(err.contains(&name), "{err}");
    assert!(err.contains("line 4"), "{err}");
    assert!(err.contains("1048576 bytes"), "{err}");
    // a smaller bound set in the options is the one applied and named
    let opts = ReadOptions {
        max_line_bytes: 1000,
        ..ReadOptions::default()
    };
    let f = philly_with(&vec![b'7'; 5000]);
    let err = read_jobs(f.path(), Some(TraceFormat::Philly), &opts, &mut |_| {})
        .unwrap_err()
        .to_string();
    assert!(err.contains("1000 bytes"), "{err}");
}

#[test]
fn lines_under_the_bound_read_as_before() {
    let f = philly_with(ROW.as_bytes());
    let mut n = 0;
    let report = read_jobs(
        f.path(),
        Some(TraceFormat::Philly),
        &ReadOptions::default(),
        &mut |_| n += 1,
    )
    .unwrap();
    assert_eq!(n, 3);
    assert_eq!(report.rows_dropped(), 0);
}

#[test]
fn an_swf_line_over_the_bound_is_not_read_into_memory() {
    let f = tempfile::Builder::new().suffix(".swf").tempfile().unwrap();
    let mut text = b"; Version: 2.2\n1 0 10 100 4 -1 -1 4 200 -1 1 1 1 -1 1 -1 -1 -1\n".to_vec();
    text.extend(vec![b'9'; 3_000_000]);
    std::fs::write(f.path(), text).unwrap();
    let strict = ReadOptions {
        strict: true,
        ..ReadOptions::default()
    };
    let err = read_jobs(f.path(), Some(TraceFormat::Swf), &strict, &mut |_| {})
        .unwrap_err()
        .to_string();
    assert!(err.contains("line 3"), "{err}");
    assert!(err.contains("1048576 bytes"), "{err}");
}
