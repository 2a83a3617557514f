//! One module per subcommand.

pub mod compression;
pub mod convert;
pub mod export_tpu;
pub mod externalize;
pub mod fingerprint;
pub mod inspect;
pub mod layout;
pub mod merge;
pub mod optimize;
pub mod plan;
pub mod proto;
pub mod reshard;
pub mod scan;
pub mod show;
pub mod split;
pub mod tags;
pub mod vars;
pub mod verify;

/// The error type subcommands return; printed by `main` with exit code 1.
pub type CmdResult = Result<(), Box<dyn std::error::Error>>;

/// Says on standard error which model file of `dir` is read when it has several (TensorFlow's
/// order: `saved_model.cpb`, then `.pb`, then `.pbtxt`), so a stale or damaged one beside it
/// is not silently ignored. Every command reading a SavedModel directory calls this first.
pub fn note_model_choice(dir: &std::path::Path) {
    let Ok(model) = unbound_savedmodel::SavedModel::open(dir) else {
        return;
    };
    for unused in model.passed_over() {
        errln!(
            "unbound: note: {} is not read: {} is preferred (as TensorFlow does)",
            unused.path.display(),
            model.model_file().path.display()
        );
    }
}

/// Warns on standard error, naming the file and the fault, when `dir/variables/variables.index`
/// is there but cannot be read (a FIFO, a device, a link to nothing): a command that goes on
/// without it says so, and `consequence` says what it gives instead. TensorFlow does the same
/// for the fingerprint's `checkpoint_hash`: 0, with a warning.
pub fn warn_unreadable_index(dir: &std::path::Path, consequence: &str) {
    if let Some(fault) = unbound_savedmodel::fingerprint::checkpoint_index_fault(dir) {
        errln!("unbound: warning: {fault}: the checkpoint index cannot be read; {consequence}");
    }
}

/// The commands that copy a whole SavedModel directory, variables included.
#[derive(Clone, Copy)]
pub enum DirCopy {
    /// `unbound split`.
    Split,
    /// `unbound merge`.
    Merge,
}

/// `error` of `split` or `merge` (`command`) on `dir`, with a way out when the directory is
/// refused for its variables (missing or damaged): `unbound proto split`/`merge --type
/// tensorflow.SavedModel` converts the model file alone, without them.
pub fn with_model_only_hint(
    error: unbound_savedmodel::SavedModelError,
    command: DirCopy,
    dir: &std::path::Path,
) -> Box<dyn std::error::Error> {
    let variables = dir.join("variables");
    let about_variables = match &error {
        unbound_savedmodel::SavedModelError::Unverified { faults, .. } => {
            faults.iter().any(|f| f.file.starts_with(&variables))
        }
        _ => false,
    };
    if !about_variables {
        return error.into();
    }
    let how = match command {
        DirCopy::Split => format!(
            "unbound proto split --type tensorflow.SavedModel {} OUT_PREFIX (and back: unbound \
             proto merge --type tensorflow.SavedModel OUT_PREFIX OUT.pb)",
            dir.join("saved_model.pb").display()
        ),
        DirCopy::Merge => format!(
            "unbound proto merge --type tensorflow.SavedModel {} OUT.pb",
            dir.join("saved_model").display()
        ),
    };
    let command = match command {
        DirCopy::Split => "split",
        DirCopy::Merge => "merge",
    };
    format!(
        "{error}\n  {command} copies a whole SavedModel, variables included; to convert the model \
         file alone, without them: {how}"
    )
    .into()
}

/// The one overwrite rule of every command that writes (`split`, `merge`, `optimize`, `proto
/// split`/`merge`, `vars --npy`, `layout pack`; `layout unpack`/`relayout` also accept an
/// empty OUTDIR): an output path that exists (file, directory or symlink) is refused, never
/// replaced; remove it first.
pub fn refuse_existing(path: &std::path::Path) -> Result<(), unbound_savedmodel::SavedModelError> {
    if std::fs::symlink_metadata(path).is_ok() {
        return Err(unbound_savedmodel::SavedModelError::OutputExists {
            path: path.to_path_buf(),
        });
    }
    Ok(())
}
