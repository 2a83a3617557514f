//! A constant in a `.cpb` chunk too large to keep decoded, which the verification every
//! writer runs streams: `externalize` writes its value into the data shard as that stream
//! goes by (`spool.rs`), instead of decompressing the chunk a second time afterwards. The
//! spool becomes the start of the shard, so the value lies before the source's own
//! tensors, where a copy made after verification would put it after them.

use std::path::Path;

use unbound_bundle::{BundleReader, BundleWriter, Tensor};
use unbound_externalize::{externalize, ExternalizeOptions};
use unbound_proto::tensorflow::DataType;
use unbound_records::Compression;
use unbound_test_support::streamed_cpb;

/// Gives the model in `dir` a checkpoint of its own: one small tensor, `own`.
fn add_own_variables(dir: &Path) {
    let mut writer = BundleWriter::create(&dir.join("variables/variables")).unwrap();
    let own = Tensor::raw(DataType::DtFloat, vec![4], vec![7u8; 16]);
    writer.add("own", &own).unwrap();
    writer.finish().unwrap();
}

/// The new variable's checkpoint entry offset and value, and the source tensor's offset.
fn written(out: &Path) -> (i64, Vec<u8>, i64) {
    let reader = BundleReader::open(&out.join("variables/variables")).unwrap();
    let key = reader
        .keys()
        .find(|k| k.starts_with(b"externalized"))
        .expect("the new variable's entry")
        .to_vec();
    let entry = reader.entry(&key).unwrap().clone();
    let value = reader.mapped(&key, true).unwrap().to_vec();
    (
        entry.offset,
        value,
        reader
            .entry(b"own")
            .expect("the source's own tensor")
            .offset,
    )
}

#[test]
fn a_streamed_value_is_written_as_verification_streams_it() {
    let root = tempfile::tempdir().unwrap();
    let content = streamed_cpb::content();
    // The same model as a `.pb`: nothing is streamed, the value is copied after the
    // source's tensors.
    let pb = root.path().join("pb");
    std::fs::create_dir(&pb).unwrap();
    let model = streamed_cpb::model().unwrap();
    std::fs::write(pb.join("saved_model.pb"), model.to_vec().unwrap()).unwrap();
    add_own_variables(&pb);
    let options = ExternalizeOptions::default();
    externalize(&pb, &root.path().join("pb_out"), &options).unwrap();
    let (offset, value, own) = written(&root.path().join("pb_out"));
    assert_eq!(value, content);
    assert!(offset > own, "copied after the source's tensors");

    for (i, compression) in [Compression::Zstd { level: 1 }, Compression::None]
        .into_iter()
        .enumerate()
    {
        let src = root.path().join(format!("cpb{i}"));
        std::fs::create_dir(&src).unwrap();
        streamed_cpb::write(&src, compression).unwrap();
        add_own_variables(&src);
        let out = root.path().join(format!("cpb{i}_out"));
        let report = externalize(&src, &out, &options).unwrap();
        assert_eq!(report.moved.len(), 1, "{compression:?}");
        let (offset, value, own) = written(&out);
        assert_eq!(value, content, "{compression:?}");
        assert_eq!(offset, 0, "{compression:?}: the value was not spooled");
        assert!(own > 0, "{compression:?}");
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
            "{compression:?}: a damaged chunk passed"
        );
    }
    let mut left: Vec<String> = std::fs::read_dir(root.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    left.sort();
    assert_eq!(
        left,
        ["cpb0", "cpb0_out", "cpb1", "cpb1_out", "pb", "pb_out"]
    );
}
