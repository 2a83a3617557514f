//! One whole-model check shared by `verify` and the fingerprint of a `.pb`: the fingerprint's
//! canonical check, made in the mode that also checks what protobuf C++ checks when it parses
//! ([`super::canonical::Encoder::is_canonical_and_valid`]), answers verify's schema check too
//! when the model is canonical, as models written by protobuf C++ are. Both read every field of
//! every node: on a model of millions of nodes they were a third of a `verify` each (issue 15).

use std::sync::{Condvar, Mutex, PoisonError};

/// The answer to "is the `.pb` canonical and valid?", published once by the fingerprint's
/// thread and awaited by verify's.
#[derive(Default)]
pub(crate) struct CanonicalVerdict {
    answer: Mutex<Option<bool>>,
    ready: Condvar,
}

impl CanonicalVerdict {
    /// Publishes `valid`, unless an answer was published already.
    pub(crate) fn publish(&self, valid: bool) {
        let mut answer = self.answer.lock().unwrap_or_else(PoisonError::into_inner);
        if answer.is_none() {
            *answer = Some(valid);
            self.ready.notify_all();
        }
    }

    /// Waits for the answer.
    pub(crate) fn wait(&self) -> bool {
        let mut answer = self.answer.lock().unwrap_or_else(PoisonError::into_inner);
        loop {
            if let Some(valid) = *answer {
                return valid;
            }
            answer = self
                .ready
                .wait(answer)
                .unwrap_or_else(PoisonError::into_inner);
        }
    }

    /// A guard that publishes "no" when dropped, if nothing was published by then: however
    /// the fingerprint ends (an error before the check, a panic), the waiter wakes.
    pub(crate) fn no_unless_answered(&self) -> impl Drop + '_ {
        struct Guard<'a>(&'a CanonicalVerdict);
        impl Drop for Guard<'_> {
            fn drop(&mut self) {
                self.0.publish(false);
            }
        }
        Guard(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_answer_stands_and_a_dropped_guard_answers_no() {
        let verdict = CanonicalVerdict::default();
        std::thread::scope(|s| {
            let waiter = s.spawn(|| verdict.wait());
            verdict.publish(true);
            verdict.publish(false);
            assert!(waiter.join().unwrap());
        });
        let verdict = CanonicalVerdict::default();
        std::thread::scope(|s| {
            let waiter = s.spawn(|| verdict.wait());
            s.spawn(|| {
                let _guard = verdict.no_unless_answered();
            });
            assert!(!waiter.join().unwrap());
        });
    }
}
