//! A byte progress bar on standard error, shown only when it is a terminal and the work is
//! large enough to be worth watching.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// Work below this many bytes gets no bar.
pub const MIN_BYTES_FOR_BAR: u64 = 64 << 20;

/// A bar for `total` bytes labelled `what`, hidden for small work or when stderr is not a
/// terminal.
pub fn bytes_bar(total: u64, what: &str) -> ProgressBar {
    let bar = ProgressBar::new(total);
    if total < MIN_BYTES_FOR_BAR {
        bar.set_draw_target(ProgressDrawTarget::hidden());
    } else {
        bar.set_draw_target(ProgressDrawTarget::stderr());
    }
    if let Ok(style) = ProgressStyle::with_template(
        "{msg} [{bar:30}] {bytes}/{total_bytes} {bytes_per_sec} eta {eta}",
    ) {
        bar.set_style(style.progress_chars("=> "));
    }
    bar.set_message(what.to_string());
    bar
}
