//! `unbound proto split` / `unbound proto merge`: one message of any type in the pool.

use std::path::{Path, PathBuf};

use unbound_chunked::{read_pb, read_prefix, write_split};
use unbound_savedmodel::verify::check_schema;
use unbound_savedmodel::{
    dir::message_descriptor,
    split::{split_message, SplitContext, DEFAULT_MAX_SIZE},
    MAX_PROTO_SIZE,
};

use super::compression::CompressionArg;
use super::CmdResult;
use crate::progress::bytes_bar;

/// `unbound proto ...` subcommands.
#[derive(clap::Subcommand)]
pub enum ProtoCommand {
    /// Split IN.pb into OUT_PREFIX.cpb (or OUT_PREFIX.pb when nothing needs splitting).
    Split {
        /// Full message type name, e.g. tensorflow.GraphDef.
        #[arg(long = "type")]
        type_name: String,
        /// The binary protobuf to split.
        input: PathBuf,
        /// Output path without extension.
        out_prefix: PathBuf,
        /// Maximum chunk size in bytes.
        #[arg(long, default_value_t = DEFAULT_MAX_SIZE, value_parser = clap::value_parser!(u64).range(1..))]
        max_size: u64,
        /// Record compression.
        #[arg(long, value_enum, default_value_t = CompressionArg::Zstd)]
        compression: CompressionArg,
    },
    /// Merge PREFIX.cpb (or PREFIX.pb) into one binary protobuf OUT.pb.
    Merge {
        /// Full message type name, e.g. tensorflow.GraphDef.
        #[arg(long = "type")]
        type_name: String,
        /// Input path without extension.
        prefix: PathBuf,
        /// The binary protobuf to write.
        output: PathBuf,
    },
}

/// Runs the command.
pub fn run(cmd: ProtoCommand) -> CmdResult {
    match cmd {
        ProtoCommand::Split {
            type_name,
            input,
            out_prefix,
            max_size,
            compression,
        } => {
            for ext in ["cpb", "pb"] {
                let mut path = out_prefix.clone().into_os_string();
                path.push(format!(".{ext}"));
                super::refuse_existing(Path::new(&path))?;
            }
            let desc = message_descriptor(&type_name).map_err(|e| format!("--type: {e}"))?;
            let message = read_pb(&input, &desc)?;
            check_schema(&message, &desc, &input.display().to_string())?;
            let total = message.encoded_len();
            let mut ctx = SplitContext::new(max_size);
            let split = split_message(message, &desc, &mut ctx)?;
            for w in &ctx.warnings {
                errln!("unbound: warning: {w}");
            }
            let bar = bytes_bar(total, "split");
            let written =
                write_split(&out_prefix, split, compression.writer_options(), &mut |n| {
                    bar.inc(n)
                })?;
            bar.finish_and_clear();
            outln!(
                "wrote {} ({} chunks)",
                written.path.display(),
                written.chunks
            )
            .map_err(|e| e.after_writing(&written.path))?;
            Ok(())
        }
        ProtoCommand::Merge {
            type_name,
            prefix,
            output,
        } => {
            super::refuse_existing(&output)?;
            let desc = message_descriptor(&type_name).map_err(|e| format!("--type: {e}"))?;
            let read = read_prefix(&prefix, &desc)?;
            check_schema(&read.message, &desc, &prefix.display().to_string())?;
            let size = read.message.encoded_len();
            if size > MAX_PROTO_SIZE {
                return Err(format!(
                    "{}: the merged message would be {size} bytes, over protobuf's limit of {MAX_PROTO_SIZE}",
                    prefix.display()
                )
                .into());
            }
            // Written in canonical form, as `merge` writes a model and as TensorFlow's Merger
            // and deterministic serialization write the message.
            let schema = unbound_canonical::Schema::new(&desc);
            let canonical = unbound_canonical::encode_to_vec(
                &schema,
                schema.root(),
                &[&read.message.to_vec()?],
            )
            .map_err(|e| format!("{}: {e}", prefix.display()))?;
            let size = canonical.len();
            unbound_io::write_atomically(&output, |out| {
                std::io::Write::write_all(out, &canonical)
                    .map_err(|e| unbound_io::IoError::os(&output, e))
            })?;
            outln!("wrote {} ({size} bytes)", output.display())
                .map_err(|e| e.after_writing(&output))?;
            Ok(())
        }
    }
}
