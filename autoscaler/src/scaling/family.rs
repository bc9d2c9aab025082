//! What model a job's name names: one keyword table, read two ways ([`gavel_family`] for
//! Gavel's per-GPU-type throughputs, [`mlperf_benchmark`] for MLPerf's runs at other sizes),
//! and the one spelling of a GPU type ([`normalize_gpu_type`]).

/// Keywords of a lower-cased job name (first match wins) → (Gavel model family, MLPerf
/// benchmark). The entries with a Gavel family, in this order, are the simulator's mapping.
const NAME_KEYWORDS: [(&str, Option<&str>, Option<&str>); 22] = [
    ("resnet-18", Some("ResNet-18"), None),
    ("resnet18", Some("ResNet-18"), None),
    ("resnet", Some("ResNet-50"), Some("resnet")),
    ("cyclegan", Some("CycleGAN"), None),
    ("transformer", Some("Transformer"), None),
    ("translat", Some("Transformer"), None),
    ("bert", Some("Transformer"), Some("bert")),
    ("recommend", Some("Recommendation"), None),
    ("ncf", Some("Recommendation"), None),
    ("a3c", Some("A3C"), None),
    ("lstm", Some("LM"), None),
    ("language", Some("LM"), None),
    ("dlrm", None, Some("dlrm")),
    ("maskrcnn", None, Some("maskrcnn")),
    ("mask-rcnn", None, Some("maskrcnn")),
    ("mask_rcnn", None, Some("maskrcnn")),
    ("minigo", None, Some("minigo")),
    ("rnnt", None, Some("rnnt")),
    ("rnn-t", None, Some("rnnt")),
    ("ssd", None, Some("ssd")),
    ("unet3d", None, Some("unet3d")),
    ("3d-unet", None, Some("unet3d")),
];

/// The Gavel model family (`ResNet-50`, `Transformer`, …) a job name maps to, if any.
pub fn gavel_family(job_name: &str) -> Option<&'static str> {
    let name = job_name.to_lowercase();
    NAME_KEYWORDS
        .iter()
        .filter_map(|(kw, fam, _)| fam.map(|f| (kw, f)))
        .find(|(kw, _)| name.contains(*kw))
        .map(|(_, f)| f)
}

/// The MLPerf Training benchmark (`bert`, `resnet`, …) a job name maps to, if any.
pub fn mlperf_benchmark(job_name: &str) -> Option<&'static str> {
    let name = job_name.to_lowercase();
    NAME_KEYWORDS
        .iter()
        .filter_map(|(kw, _, b)| b.map(|b| (kw, b)))
        .find(|(kw, _)| name.contains(*kw))
        .map(|(_, b)| b)
}

/// Vendor and marketing words dropped before the model name.
const VENDOR_WORDS: [&str; 9] = [
    "nvidia",
    "tesla",
    "geforce",
    "quadro",
    "graphcore",
    "habana",
    "huawei",
    "google",
    "amd",
];

/// Words that name a product line and need the next word (`rtx 2080` → `rtx2080`).
const LINE_WORDS: [&str; 5] = ["rtx", "gtx", "titan", "ascend", "ipu"];

/// The GPU family of a type name, lower case: `NVIDIA A100-SXM4-80GB (400W)` and `a100_pcie`
/// → `a100`, `Tesla V100-SXM2-32GB` and `v100_unconsolidated` → `v100`, `GeForce RTX 2080 Ti`
/// → `rtx2080`. Empty input gives an empty string.
pub fn normalize_gpu_type(raw: &str) -> String {
    let lower = raw.to_lowercase();
    let words: Vec<&str> = lower
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| !w.is_empty() && !VENDOR_WORDS.contains(w))
        .collect();
    match words.as_slice() {
        [] => String::new(),
        [line, next, ..] if LINE_WORDS.contains(line) => format!("{line}{next}"),
        [first, ..] => (*first).to_string(),
    }
}

/// The accelerator of an MLPerf run at the grain where speeds differ (`a100-pcie`,
/// `a100-sxm`, `tpu`, `ipugc200`, …): [`normalize_gpu_type`] plus the A100's form factor.
pub fn accelerator_variant(raw: &str) -> String {
    let family = normalize_gpu_type(raw);
    let lower = raw.to_lowercase();
    if family == "a100" {
        if lower.contains("pcie") {
            return "a100-pcie".into();
        }
        if lower.contains("sxm") {
            return "a100-sxm".into();
        }
    }
    family
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gpu_type_spellings_share_one_name() {
        assert_eq!(normalize_gpu_type("NVIDIA A100-SXM4-80GB (400W)"), "a100");
        assert_eq!(normalize_gpu_type("A100-SXM4-40GB"), "a100");
        assert_eq!(normalize_gpu_type("V100"), "v100");
        assert_eq!(normalize_gpu_type("Tesla V100-SXM2-32GB"), "v100");
        assert_eq!(normalize_gpu_type("v100_unconsolidated"), "v100");
        assert_eq!(normalize_gpu_type("GeForce RTX 2080 Ti"), "rtx2080");
        assert_eq!(normalize_gpu_type("Graphcore IPU GC200"), "ipugc200");
        assert_eq!(normalize_gpu_type("  "), "");
        assert_eq!(
            accelerator_variant("NVIDIA A100-PCIe-40GB(250W)"),
            "a100-pcie"
        );
        assert_eq!(
            accelerator_variant("NVIDIA A100-SXM-80GB (500W)"),
            "a100-sxm"
        );
        assert_eq!(accelerator_variant("TPU"), "tpu");
    }

    #[test]
    fn names_map_to_families_first_match() {
        assert_eq!(gavel_family("resnet18-cifar"), Some("ResNet-18"));
        assert_eq!(gavel_family("ResNet50_imagenet"), Some("ResNet-50"));
        assert_eq!(gavel_family("bert-large"), Some("Transformer"));
        assert_eq!(gavel_family("dlrm"), None);
        assert_eq!(mlperf_benchmark("bert-large"), Some("bert"));
        assert_eq!(mlperf_benchmark("Mask-RCNN coco"), Some("maskrcnn"));
        assert_eq!(mlperf_benchmark("resnet18"), Some("resnet"));
        assert_eq!(mlperf_benchmark("job-42"), None);
    }
}
