//! One module per subcommand.

pub mod compression;
pub mod export_tpu;
pub mod fingerprint;
pub mod inspect;
pub mod layout;
pub mod merge;
pub mod optimize;
pub mod proto;
pub mod reshard;
pub mod show;
pub mod split;
pub mod tags;
pub mod vars;
pub mod verify;

/// The error type subcommands return; printed by `main` with exit code 1.
pub type CmdResult = Result<(), Box<dyn std::error::Error>>;
