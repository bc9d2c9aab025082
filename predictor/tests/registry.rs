//! The model registry on a real predictor: saved then loaded predicts identically; corrupt,
//! truncated, incompatible or missing artifacts are refused with an error naming the file.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::OnceLock;

use augur_datasets::bundled::Dataset;
use augur_datasets::split::clamp_duration;
use augur_datasets::ReadOptions;
use augur_features::{batch_features, FeatureSchema, FEATURE_SCHEMA_VERSION};
use augur_models::Matrix;
use augur_predictor::registry::{PayloadEncoding, Selector};
use augur_predictor::{
    ArtifactMeta, ModelRegistry, NewArtifact, RegistryError, RuntimePredictor, RuntimeTrainer,
};

/// A small real predictor trained on the first 5,000 Mira jobs, and the feature rows of the
/// next 1,000 to compare predictions on.
fn trained() -> &'static (RuntimePredictor, Vec<f32>) {
    static CELL: OnceLock<(RuntimePredictor, Vec<f32>)> = OnceLock::new();
    CELL.get_or_init(|| {
        let (table, _) = Dataset::Mira.load(&ReadOptions::default()).unwrap();
        let jobs = table.to_records().unwrap();
        let jobs = &jobs[..6000];
        let schema = FeatureSchema::for_jobs(&jobs[..5000]);
        let x = batch_features(jobs, &schema);
        let y: Vec<f64> = jobs
            .iter()
            .map(|j| clamp_duration(j.duration.unwrap_or(1.0)).ln())
            .collect();
        let mut trainer = RuntimeTrainer::default();
        trainer.params.n_trees = 40;
        let rows: Vec<usize> = (0..5000).collect();
        let predictor = trainer.train(&schema, &x, &y, &rows).unwrap();
        let d = schema.len();
        (predictor, x[5000 * d..].to_vec())
    })
}

fn info() -> NewArtifact {
    let mut a = NewArtifact::new("mira", 5000);
    a.metrics = BTreeMap::from([("mae_log".to_string(), 0.7), ("within2x".to_string(), 0.7)]);
    a
}

fn predictions(p: &RuntimePredictor, x: &[f32]) -> Vec<(f64, f64, f64)> {
    let d = p.schema.len();
    let m = Matrix::new(x, x.len() / d, d).unwrap();
    p.predict_batch(&m)
        .unwrap()
        .into_iter()
        .map(|r| (r.seconds, r.lower, r.upper))
        .collect()
}

/// A registry in a temp dir with one saved version; returns it with its metadata.
fn saved(compress: bool) -> (tempfile::TempDir, ModelRegistry, ArtifactMeta) {
    let dir = tempfile::tempdir().unwrap();
    let reg = ModelRegistry::open(dir.path().join("models")).unwrap();
    let mut i = info();
    i.compress = compress;
    let meta = reg.save(&trained().0, i).unwrap();
    (dir, reg, meta)
}

fn payload_path(reg: &ModelRegistry, meta: &ArtifactMeta) -> PathBuf {
    reg.version_dir("runtime", meta.version)
        .join(&meta.payload_file)
}

#[test]
fn round_trip_predicts_identically_and_versions_increase() {
    let (predictor, x) = trained();
    for compress in [true, false] {
        let (_dir, reg, meta) = saved(compress);
        assert_eq!(meta.version, 1);
        assert_eq!(meta.kind, "runtime");
        assert_eq!(meta.dataset, "mira");
        assert_eq!(meta.training_rows, 5000);
        assert_eq!(meta.feature_schema_version, FEATURE_SCHEMA_VERSION);
        assert_eq!(meta.payload_sha256.len(), 64);
        assert!(chrono::DateTime::parse_from_rfc3339(&meta.created_at).is_ok());
        let expected_encoding = if compress {
            PayloadEncoding::JsonGzip
        } else {
            PayloadEncoding::Json
        };
        assert_eq!(meta.payload_encoding, expected_encoding);
        let (loaded, loaded_meta) = reg.load_latest::<RuntimePredictor>().unwrap();
        assert_eq!(loaded_meta, meta);
        assert_eq!(predictions(&loaded, x), predictions(predictor, x));
        assert_eq!(loaded.interval_log, predictor.interval_log);

        // a second save is v2; v1 stays loadable; the listing shows both with metadata
        let meta2 = reg.save(predictor, info()).unwrap();
        assert_eq!(meta2.version, 2);
        assert_eq!(reg.load_latest::<RuntimePredictor>().unwrap().1.version, 2);
        assert_eq!(reg.load_version::<RuntimePredictor>(1).unwrap().1, meta);
        let listed = reg.versions("runtime").unwrap();
        assert_eq!(listed.iter().map(|e| e.version).collect::<Vec<_>>(), [1, 2]);
        assert!(listed.iter().all(|e| e.meta.is_ok()));
        assert_eq!(reg.kinds().unwrap(), ["runtime"]);
        // no temporary files are left behind
        let leftovers: Vec<_> = std::fs::read_dir(reg.kind_dir("runtime"))
            .unwrap()
            .filter_map(Result::ok)
            .filter(|e| e.file_name().to_string_lossy().starts_with('.'))
            .collect();
        assert!(leftovers.is_empty(), "{leftovers:?}");
    }
}

#[test]
fn promote_and_rollback() {
    let (_dir, reg, _) = saved(true);
    let p = trained().0.clone();
    reg.save(&p, info()).unwrap();
    reg.save(&p, info()).unwrap();
    // nothing promoted: serving is the latest, `promoted` is an error
    assert_eq!(reg.resolve("runtime", Selector::Serving).unwrap(), 3);
    assert!(matches!(
        reg.load::<RuntimePredictor>(Selector::Promoted),
        Err(RegistryError::NotPromoted { .. })
    ));
    assert_eq!(reg.promote("runtime", 1).unwrap().version, 1);
    assert_eq!(reg.promote("runtime", 2).unwrap().history, [1]);
    assert_eq!(reg.load_serving::<RuntimePredictor>().unwrap().1.version, 2);
    let back = reg.rollback("runtime").unwrap();
    assert_eq!((back.version, back.history.len()), (1, 0));
    assert_eq!(reg.load_serving::<RuntimePredictor>().unwrap().1.version, 1);
    let err = reg.rollback("runtime").unwrap_err();
    assert!(
        matches!(err, RegistryError::NothingToRollBack { current: 1, .. }),
        "{err}"
    );
    // promoting a version that does not exist is refused and changes nothing
    let err = reg.promote("runtime", 9).unwrap_err();
    assert!(err.to_string().contains("available: v1, v2, v3"), "{err}");
    assert_eq!(reg.promotion("runtime").unwrap().unwrap().version, 1);
}

#[test]
fn truncated_payload_is_refused() {
    let (_dir, reg, meta) = saved(true);
    let path = payload_path(&reg, &meta);
    let bytes = std::fs::read(&path).unwrap();
    std::fs::write(&path, &bytes[..bytes.len() / 2]).unwrap();
    let err = reg.load_latest::<RuntimePredictor>().unwrap_err();
    assert!(matches!(err, RegistryError::SizeMismatch { .. }), "{err}");
    let msg = err.to_string();
    assert!(
        msg.contains("model.json.gz") && msg.contains("truncated"),
        "{msg}"
    );
    // also when the metadata is edited to match the size: the hash catches it
    let meta_path = reg.version_dir("runtime", 1).join("meta.json");
    let mut m: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&meta_path).unwrap()).unwrap();
    m["payload_bytes"] = serde_json::json!(bytes.len() / 2);
    std::fs::write(&meta_path, serde_json::to_vec(&m).unwrap()).unwrap();
    let err = reg.load_latest::<RuntimePredictor>().unwrap_err();
    assert!(matches!(err, RegistryError::HashMismatch { .. }), "{err}");
}

#[test]
fn flipped_byte_is_refused() {
    for compress in [true, false] {
        let (_dir, reg, meta) = saved(compress);
        let path = payload_path(&reg, &meta);
        let mut bytes = std::fs::read(&path).unwrap();
        let mid = bytes.len() / 2;
        bytes[mid] ^= 0x01;
        std::fs::write(&path, &bytes).unwrap();
        let err = reg.load_latest::<RuntimePredictor>().unwrap_err();
        assert!(matches!(err, RegistryError::HashMismatch { .. }), "{err}");
        assert!(err.to_string().contains(&meta.payload_file), "{err}");
        assert!(reg.verify("runtime", 1).is_err());
    }
}

#[test]
fn wrong_feature_schema_version_is_refused() {
    // a model trained with another schema version, saved honestly
    let dir = tempfile::tempdir().unwrap();
    let reg = ModelRegistry::open(dir.path()).unwrap();
    let mut old = trained().0.clone();
    old.schema.version = FEATURE_SCHEMA_VERSION + 1;
    let meta = reg.save(&old, info()).unwrap();
    assert_eq!(meta.feature_schema_version, FEATURE_SCHEMA_VERSION + 1);
    let err = reg.load_latest::<RuntimePredictor>().unwrap_err();
    assert!(
        matches!(err, RegistryError::IncompatibleSchema { found, expected, .. }
            if found == FEATURE_SCHEMA_VERSION + 1 && expected == FEATURE_SCHEMA_VERSION),
        "{err}"
    );
    assert!(err.to_string().contains("retrain"), "{err}");

    // a metadata file edited to claim the current version: the payload itself disagrees
    let meta_path = reg.version_dir("runtime", 1).join("meta.json");
    let mut m: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&meta_path).unwrap()).unwrap();
    m["feature_schema_version"] = serde_json::json!(FEATURE_SCHEMA_VERSION);
    std::fs::write(&meta_path, serde_json::to_vec(&m).unwrap()).unwrap();
    let err = reg.load_latest::<RuntimePredictor>().unwrap_err();
    assert!(
        matches!(&err, RegistryError::IncompatibleSchema { path, .. } if path.ends_with("model.json.gz")),
        "{err}"
    );
}

#[test]
fn newer_artifact_format_is_refused() {
    let (_dir, reg, _) = saved(true);
    let meta_path = reg.version_dir("runtime", 1).join("meta.json");
    let mut m: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&meta_path).unwrap()).unwrap();
    m["format_version"] = serde_json::json!(99);
    std::fs::write(&meta_path, serde_json::to_vec(&m).unwrap()).unwrap();
    let err = reg.load_latest::<RuntimePredictor>().unwrap_err();
    assert!(
        matches!(err, RegistryError::IncompatibleFormat { found: 99, .. }),
        "{err}"
    );
}

#[test]
fn missing_or_garbled_metadata_is_refused() {
    let (_dir, reg, _) = saved(true);
    let meta_path = reg.version_dir("runtime", 1).join("meta.json");
    std::fs::write(&meta_path, b"{\"kind\": \"runt").unwrap();
    let err = reg.load_latest::<RuntimePredictor>().unwrap_err();
    assert!(matches!(err, RegistryError::BadMetadata { .. }), "{err}");
    assert!(err.to_string().contains("meta.json"), "{err}");

    std::fs::remove_file(&meta_path).unwrap();
    let err = reg.load_latest::<RuntimePredictor>().unwrap_err();
    assert!(
        matches!(err, RegistryError::MissingMetadata { .. }),
        "{err}"
    );
    assert!(err.to_string().contains("meta.json"), "{err}");
    // the listing still shows the version, with the reason
    let listed = reg.versions("runtime").unwrap();
    assert_eq!(listed.len(), 1);
    assert!(matches!(
        listed[0].meta,
        Err(RegistryError::MissingMetadata { .. })
    ));
    // a payload name that escapes the version folder is refused
    let (_dir2, reg2, _) = saved(true);
    let meta_path = reg2.version_dir("runtime", 1).join("meta.json");
    let mut m: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&meta_path).unwrap()).unwrap();
    m["payload_file"] = serde_json::json!("../../secret");
    std::fs::write(&meta_path, serde_json::to_vec(&m).unwrap()).unwrap();
    let err = reg2.load_latest::<RuntimePredictor>().unwrap_err();
    assert!(matches!(err, RegistryError::BadMetadata { .. }), "{err}");
}

#[test]
fn unknown_version_and_empty_registry_are_clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    let reg = ModelRegistry::open(dir.path()).unwrap();
    let err = reg.load_latest::<RuntimePredictor>().unwrap_err();
    assert!(matches!(err, RegistryError::Empty { .. }), "{err}");
    assert!(reg.kinds().unwrap().is_empty());

    let (_dir, reg, _) = saved(true);
    let err = reg.load_version::<RuntimePredictor>(7).unwrap_err();
    assert!(
        matches!(&err, RegistryError::UnknownVersion { version: 7, .. }),
        "{err}"
    );
    assert!(err.to_string().contains("available: v1"), "{err}");
}

#[test]
fn non_finite_metrics_and_bad_kinds_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let reg = ModelRegistry::open(dir.path()).unwrap();
    let mut i = info();
    i.metrics.insert("coverage80".into(), f64::NAN);
    let err = reg.save(&trained().0, i).unwrap_err();
    assert!(matches!(err, RegistryError::InvalidMetric { .. }), "{err}");
    let err = reg.save_as("../x", &1u32, 1, info()).unwrap_err();
    assert!(matches!(err, RegistryError::InvalidKind(_)), "{err}");
    // nothing was written
    assert!(reg.kinds().unwrap().is_empty());
}
