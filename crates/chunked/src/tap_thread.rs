//! A [`StreamTap`] whose sinks run on a thread of their own, beside the stream.
//!
//! A tap's sink is called on the thread that decompresses and parses the chunk; what the
//! sinks do (hash every byte for a fingerprint, write the values to a file) then adds to the
//! stream's time, which is the time of the command when the chunk is gigabytes of
//! constants. [`TapThread`] hands the bytes over in blocks instead (a few in flight, the same
//! ones going round), with the sink's other calls in order between them, so on two cores
//! the stream runs at the speed of its decompression.

use std::io::Write;
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::Arc;
use std::thread::JoinHandle;

use crate::streamed::{StreamTap, StreamedChunk, TapSink};

/// Bytes of one block handed to the sink's thread.
const BLOCK: usize = 256 << 10;
/// Blocks in flight.
const BLOCKS_AHEAD: usize = 8;

/// Runs the sinks of the tap it wraps on a thread per stream (see the module docs).
pub struct TapThread(pub Arc<dyn StreamTap>);

impl StreamTap for TapThread {
    fn begin(&self, chunk: StreamedChunk) -> Option<Box<dyn TapSink>> {
        let mut sink = self.0.begin(chunk)?;
        let (to_sink, calls) = sync_channel::<Call>(BLOCKS_AHEAD);
        let (give_back, returned) = sync_channel::<Vec<u8>>(BLOCKS_AHEAD);
        let thread = std::thread::Builder::new()
            .name("unbound-tap".into())
            .spawn(move || {
                for call in calls {
                    match call {
                        Call::Bytes(block) => {
                            // A sink that fails is never finished: the rest is passed over.
                            if sink.write_all(&block).is_err() {
                                return;
                            }
                            let _ = give_back.try_send(block);
                        }
                        Call::Lazy(offset, len) => sink.lazy_value(offset, len),
                        Call::Finish => {
                            sink.finish();
                            return;
                        }
                    }
                }
            })
            .ok()?;
        Some(Box::new(ThreadSink {
            to_sink: Some(to_sink),
            returned,
            block: Vec::new(),
            thread: Some(thread),
        }))
    }
}

/// What the stream asks of the sink, in order.
enum Call {
    Bytes(Vec<u8>),
    Lazy(u64, u64),
    Finish,
}

/// The stream's side of a sink on its own thread.
struct ThreadSink {
    to_sink: Option<SyncSender<Call>>,
    /// Blocks the sink is done with.
    returned: Receiver<Vec<u8>>,
    /// The block being filled.
    block: Vec<u8>,
    thread: Option<JoinHandle<()>>,
}

impl ThreadSink {
    /// Sends `call`; the sink's thread having stopped (its sink failed) is not an error of
    /// the stream.
    fn send(&mut self, call: Call) {
        if let Some(to_sink) = &self.to_sink {
            if to_sink.send(call).is_err() {
                self.to_sink = None;
            }
        }
    }

    /// Sends the block being filled, if it holds anything.
    fn send_block(&mut self) {
        if self.block.is_empty() {
            return;
        }
        let next = self
            .returned
            .try_recv()
            .unwrap_or_else(|_| Vec::with_capacity(BLOCK));
        let full = std::mem::replace(&mut self.block, next);
        self.send(Call::Bytes(full));
        self.block.clear();
    }

    /// Waits for the sink's thread to end.
    fn join(&mut self) {
        self.to_sink = None;
        if let Some(thread) = self.thread.take() {
            if let Err(panic) = thread.join() {
                std::panic::resume_unwind(panic);
            }
        }
    }
}

impl Write for ThreadSink {
    fn write(&mut self, mut data: &[u8]) -> std::io::Result<usize> {
        let len = data.len();
        while !data.is_empty() {
            if self.block.capacity() == 0 {
                self.block.reserve_exact(BLOCK);
            }
            let room = BLOCK - self.block.len();
            let n = room.min(data.len());
            self.block.extend_from_slice(&data[..n]);
            data = &data[n..];
            if self.block.len() == BLOCK {
                self.send_block();
            }
        }
        Ok(len)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl TapSink for ThreadSink {
    fn lazy_value(&mut self, offset: u64, len: u64) {
        // The announcement comes before the value's bytes, which may be in the block being
        // filled: it is sent first.
        self.send_block();
        self.send(Call::Lazy(offset, len));
    }

    fn finish(mut self: Box<Self>) {
        self.send_block();
        self.send(Call::Finish);
        self.join();
    }
}

impl Drop for ThreadSink {
    /// A stream that did not finish: the sink is dropped unfinished, on its thread.
    fn drop(&mut self) {
        self.join();
    }
}
