//! Writes the crate's encoded `FileDescriptorSet` to the path given as the
//! only argument (used by `interop/proto_schema_check.py`).
//!
//! ```text
//! cargo run -p unbound-proto --example dump_descriptors -- OUT.binpb
//! ```

use std::process::ExitCode;

fn main() -> ExitCode {
    let mut args = std::env::args_os().skip(1);
    let (Some(out), None) = (args.next(), args.next()) else {
        eprintln!("usage: dump_descriptors OUT");
        return ExitCode::from(2);
    };
    match std::fs::write(&out, unbound_proto::FILE_DESCRIPTOR_SET) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!(
                "dump_descriptors: cannot write {}: {err}",
                out.to_string_lossy()
            );
            ExitCode::FAILURE
        }
    }
}
