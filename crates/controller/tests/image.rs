//! The controller's container image (issue #17), as `scripts/image.sh` builds it (an image
//! index; its linux/amd64 image here): its config (a numeric non-root user, the
//! entrypoint, the OCI labels), its one layer (the binary and nothing else: no shell, no
//! libraries), the binary (static, stripped, telling its version and commit), and the
//! controller taken from the image running a rollout on the test hub under the shipped
//! RBAC.
//!
//! Needs `MWRS_IMAGE` (the OCI archive `scripts/image.sh` prints; `scripts/test.sh` builds
//! it) and `MWRS_TEST_KUBECONFIG`; skipped without them.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::{create_app_for_all, spawn_controller_at, start_agent_succeeding, wait_complete};
use mwrs_testsupport::TestHub;
use serde_json::Value;

/// The image's entrypoint, and where its binary is in the layer.
const BINARY: &str = "usr/local/bin/mwrs-controller";

/// A directory removed with everything in it when this goes.
struct RemovedOnDrop(PathBuf);

impl Drop for RemovedOnDrop {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// An OCI archive unpacked: its blobs by digest.
struct Archive {
    dir: PathBuf,
}

impl Archive {
    fn unpack(archive: &Path, into: &Path) -> Self {
        let dir = into.join("archive");
        untar(archive, &dir);
        Self { dir }
    }

    fn blob_path(&self, digest: &str) -> PathBuf {
        let (algo, hex) = digest.split_once(':').expect("digest algo:hex");
        self.dir.join("blobs").join(algo).join(hex)
    }

    fn json(&self, digest: &str) -> Value {
        serde_json::from_slice(&std::fs::read(self.blob_path(digest)).unwrap()).unwrap()
    }

    /// The linux/amd64 image manifest: the layout's one entry is an image index over the
    /// platforms built (`scripts/image.sh`), followed to that platform.
    fn manifest(&self) -> Value {
        let top: Value =
            serde_json::from_slice(&std::fs::read(self.dir.join("index.json")).unwrap()).unwrap();
        let entries = top["manifests"].as_array().unwrap();
        assert_eq!(entries.len(), 1, "{top}");
        let mut doc = self.json(entries[0]["digest"].as_str().unwrap());
        while doc["mediaType"] == "application/vnd.oci.image.index.v1+json" {
            let amd64 = doc["manifests"]
                .as_array()
                .unwrap()
                .iter()
                .find(|m| {
                    m["platform"]["os"] == "linux" && m["platform"]["architecture"] == "amd64"
                })
                .unwrap_or_else(|| panic!("no linux/amd64 image: {doc}"))
                .clone();
            doc = self.json(amd64["digest"].as_str().unwrap());
        }
        doc
    }
}

/// Unpacks the tar file `archive` (compressed or not) into the new directory `into`.
fn untar(archive: &Path, into: &Path) {
    std::fs::create_dir_all(into).unwrap();
    let (archive, into) = (archive.to_string_lossy(), into.to_string_lossy());
    run("tar", &["-xf", &archive, "-C", &into]);
}

fn run(program: &str, args: &[&str]) -> String {
    let out = Command::new(program).args(args).output().unwrap();
    assert!(
        out.status.success(),
        "{program} {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// The ELF file's program header types and section names.
fn elf_parts(bytes: &[u8]) -> (Vec<u32>, Vec<String>) {
    assert_eq!(&bytes[..5], b"\x7fELF\x02", "a 64-bit ELF file");
    let u16_at = |o: usize| u16::from_le_bytes(bytes[o..o + 2].try_into().unwrap()) as usize;
    let u32_at = |o: usize| u32::from_le_bytes(bytes[o..o + 4].try_into().unwrap());
    let u64_at = |o: usize| u64::from_le_bytes(bytes[o..o + 8].try_into().unwrap()) as usize;
    let (phoff, phentsize, phnum) = (u64_at(0x20), u16_at(0x36), u16_at(0x38));
    let segments = (0..phnum).map(|i| u32_at(phoff + i * phentsize)).collect();
    let (shoff, shentsize, shnum, shstrndx) =
        (u64_at(0x28), u16_at(0x3a), u16_at(0x3c), u16_at(0x3e));
    let names_at = u64_at(shoff + shstrndx * shentsize + 0x18);
    let sections = (0..shnum)
        .map(|i| {
            let start = names_at + u32_at(shoff + i * shentsize) as usize;
            let end = bytes[start..].iter().position(|b| *b == 0).unwrap() + start;
            String::from_utf8_lossy(&bytes[start..end]).into_owned()
        })
        .collect();
    (segments, sections)
}

/// ELF program header type of the dynamic loader's path: a dynamically linked binary.
const PT_INTERP: u32 = 3;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_image_is_one_static_binary_run_as_non_root_that_rolls_out() {
    let Ok(archive) = std::env::var("MWRS_IMAGE") else {
        eprintln!("MWRS_IMAGE not set (scripts/image.sh): skipped");
        return;
    };
    let tmp = std::env::temp_dir().join(format!("mwrs-image-test-{}", std::process::id()));
    let _cleanup = RemovedOnDrop(tmp.clone());
    let image = Archive::unpack(Path::new(&archive), &tmp);
    let manifest = image.manifest();
    let config = image.json(manifest["config"]["digest"].as_str().unwrap());

    let run_config = &config["config"];
    assert_eq!(run_config["User"], "65532:65532", "{config}");
    assert_eq!(
        run_config["Entrypoint"][0],
        format!("/{BINARY}"),
        "{config}"
    );
    let labels = &run_config["Labels"];
    assert_eq!(
        labels["org.opencontainers.image.version"],
        env!("CARGO_PKG_VERSION")
    );
    assert_eq!(labels["org.opencontainers.image.licenses"], "Apache-2.0");
    let revision = labels["org.opencontainers.image.revision"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(revision.len() >= 7, "{labels}");

    // One layer: the binary and the directories above it, nothing else.
    let layers = manifest["layers"].as_array().unwrap();
    assert_eq!(layers.len(), 1, "{manifest}");
    let layer = image.blob_path(layers[0]["digest"].as_str().unwrap());
    let listing = run("tar", &["-tf", &layer.to_string_lossy()]);
    let files: Vec<&str> = listing
        .lines()
        .map(|l| l.trim_start_matches("./"))
        .filter(|l| !l.ends_with('/') && !l.is_empty())
        .collect();
    assert_eq!(files, [BINARY], "{listing}");
    let rootfs = tmp.join("rootfs");
    untar(&layer, &rootfs);
    let binary = rootfs.join(BINARY);
    let bytes = std::fs::read(&binary).unwrap();
    let (segments, sections) = elf_parts(&bytes);
    assert!(!segments.contains(&PT_INTERP), "dynamically linked");
    assert!(
        !sections
            .iter()
            .any(|s| s == ".symtab" || s.starts_with(".debug")),
        "not stripped: {sections:?}"
    );
    let image_bytes: u64 = layers.iter().map(|l| l["size"].as_u64().unwrap()).sum();
    eprintln!(
        "MEASURED image: one layer of {:.1} MiB (compressed); binary {:.1} MiB",
        image_bytes as f64 / 1048576.0,
        bytes.len() as f64 / 1048576.0
    );
    assert!(image_bytes < 30 << 20, "{image_bytes} B");

    let version = run(&binary.to_string_lossy(), &["--version"]);
    assert!(
        version.contains(env!("CARGO_PKG_VERSION")) && version.contains(&revision),
        "{version}"
    );

    // The image's controller runs a rollout on the hub.
    let Some(hub) = TestHub::from_env("image", 3).await else {
        return;
    };
    let _agent = start_agent_succeeding(&hub, std::time::Duration::from_millis(100));
    let _controller = spawn_controller_at(&binary, &hub, &[], "info").await;
    create_app_for_all(&hub).await;
    wait_complete(&hub, "app", None).await;
}
