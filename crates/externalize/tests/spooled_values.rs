//! Constants in `.cpb` chunks too large to keep decoded, which the verification every writer
//! runs streams (two nodes, each a message chunk, streamed on both cores by the merge,
//! `unbound_chunked`'s `ahead.rs`; or two values, each a bytes chunk, streamed by the
//! check the merge leaves them to, `check_deferred`):
//! `externalize` writes their values into the data shard as those streams go by
//! (`spool.rs`), instead of decompressing the chunks a second time afterwards. The spool
//! becomes the start of the shard, so the values lie before the source's own tensors,
//! where a copy made after verification would put them after.

use std::path::Path;

use unbound_bundle::{BundleReader, BundleWriter, Tensor};
use unbound_externalize::{externalize, ExternalizeOptions};
use unbound_proto::tensorflow::DataType;
use unbound_records::Compression;
use unbound_test_support::streamed_cpb::{self, Layout};

/// Gives the model in `dir` a checkpoint of its own: one small tensor, `own`.
fn add_own_variables(dir: &Path) {
    let mut writer = BundleWriter::create(&dir.join("variables/variables")).unwrap();
    let own = Tensor::raw(DataType::DtFloat, vec![4], vec![7u8; 16]);
    writer.add("own", &own).unwrap();
    writer.finish().unwrap();
}

/// The new variables' checkpoint entries (offset and value), and the source tensor's offset.
fn written(out: &Path) -> (Vec<(i64, Vec<u8>)>, i64) {
    let reader = BundleReader::open(&out.join("variables/variables")).unwrap();
    let keys: Vec<Vec<u8>> = reader
        .keys()
        .filter(|k| k.starts_with(b"externalized"))
        .map(<[u8]>::to_vec)
        .collect();
    let new = keys
        .iter()
        .map(|key| {
            let offset = reader.entry(key).unwrap().offset;
            (offset, reader.mapped(key, true).unwrap().to_vec())
        })
        .collect();
    let own = reader
        .entry(b"own")
        .expect("the source's own tensor")
        .offset;
    (new, own)
}

#[test]
fn a_streamed_value_is_written_as_verification_streams_it() {
    let root = tempfile::tempdir().unwrap();
    let content = streamed_cpb::content();
    // The same model as a `.pb`: nothing is streamed, the value is copied after the
    // source's tensors.
    let pb = root.path().join("pb");
    std::fs::create_dir(&pb).unwrap();
    let model = streamed_cpb::model(2).unwrap();
    std::fs::write(pb.join("saved_model.pb"), model.to_vec().unwrap()).unwrap();
    add_own_variables(&pb);
    let options = ExternalizeOptions::default();
    externalize(&pb, &root.path().join("pb_out"), &options).unwrap();
    let (new, own) = written(&root.path().join("pb_out"));
    assert_eq!(new.len(), 2);
    for (offset, value) in new {
        assert!(value == content, "a value differs");
        assert!(offset > own, "copied after the source's tensors");
    }

    let cases = [
        (Compression::Zstd { level: 1 }, Layout::Nodes),
        (Compression::None, Layout::Nodes),
        (Compression::Zstd { level: 1 }, Layout::Values),
    ];
    for (i, (compression, layout)) in cases.into_iter().enumerate() {
        let src = root.path().join(format!("cpb{i}"));
        std::fs::create_dir(&src).unwrap();
        streamed_cpb::write(&src, compression, 2, layout).unwrap();
        add_own_variables(&src);
        let out = root.path().join(format!("cpb{i}_out"));
        let report = externalize(&src, &out, &options).unwrap();
        assert_eq!(report.moved.len(), 2, "{compression:?} {layout:?}");
        let (new, own) = written(&out);
        assert_eq!(new.len(), 2);
        for (offset, value) in new {
            assert!(
                value == content,
                "{compression:?} {layout:?}: a value differs"
            );
            assert!(
                offset < own,
                "{compression:?} {layout:?}: a value was not spooled"
            );
        }
        let verified = unbound_savedmodel::verify::verify_dir(&out);
        assert!(verified.faults.is_empty(), "{:?}", verified.faults);

        // A damaged chunk: refused by the verification, and the spool leaves nothing.
        let cpb = src.join("saved_model.cpb");
        let mut bytes = std::fs::read(&cpb).unwrap();
        let middle = bytes.len() / 2;
        bytes[middle] ^= 0x40;
        std::fs::write(&cpb, &bytes).unwrap();
        let damaged_out = root.path().join(format!("cpb{i}_damaged"));
        assert!(
            externalize(&src, &damaged_out, &options).is_err(),
            "{compression:?} {layout:?}: a damaged chunk passed"
        );
    }
    // Whichever stream began first and however the source is compressed, the same bytes
    // (of the same layout).
    for file in [
        "variables/variables.index",
        "variables/variables.data-00000-of-00001",
    ] {
        let zstd = std::fs::read(root.path().join("cpb0_out").join(file)).unwrap();
        let stored = std::fs::read(root.path().join("cpb1_out").join(file)).unwrap();
        assert!(
            zstd == stored,
            "{file} differs between a zstd and a stored source"
        );
    }
    let mut left: Vec<String> = std::fs::read_dir(root.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    left.sort();
    assert_eq!(
        left,
        ["cpb0", "cpb0_out", "cpb1", "cpb1_out", "cpb2", "cpb2_out", "pb", "pb_out"]
    );
}
