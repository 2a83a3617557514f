//! Long runs of message elements (a graph's millions of nodes, a library's functions) encoded
//! on worker threads a batch at a time, while the encoder's own thread reads on.
//!
//! The encoder in memory ([`crate::encode_to_vec`]) cut each run into batches of about a
//! megabyte and encoded each batch in halves, one on its own thread and one on a thread
//! started for it, then appended the second half and read the next batch: every batch waited
//! for the slower half, and the reading of the next one kept the other core idle. On the
//! non-canonical 3M-node model that left the second core 44% idle (issue 29). Here the
//! encoder's thread only reads the run and hands each batch to a worker as soon as it is
//! gathered ([`Pipeline::add`]); the workers take batches as they come free, and what they
//! encoded is appended in the order the batches were handed over ([`Pipeline::end_run`]), so
//! the output is the one encoding the run in one go gives. A few batches are in flight at a
//! time: memory holds a few megabytes of them.

use std::any::Any;
use std::collections::BTreeMap;
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex};

use super::{Encoder, Occ, BUFFER, PARALLEL_AT, PARALLEL_BATCH};
use crate::error::Result;
use crate::schema::{Schema, TypeId};
use crate::sink::{Count, Sink};

/// Batches in flight per worker, besides the one the encoder's thread is gathering.
const AHEAD_PER_WORKER: usize = 2;

/// Elements of one run handed to a worker: field `number` of a message at `depth`, each
/// element a message of type `ty`.
struct Batch<'a> {
    seq: u64,
    number: u32,
    ty: TypeId,
    depth: usize,
    elements: Vec<Occ<'a>>,
    /// A buffer to encode into (one a batch before was encoded into, so its pages are not
    /// fresh pages the kernel zeroes).
    out: Vec<u8>,
}

/// What a worker made of a batch.
enum Done {
    /// The size of the elements' encoding (keys and lengths included), and that encoding.
    Encoded(Result<(u64, Vec<u8>)>),
    /// The worker panicked: carried on in the encoder's thread.
    Panicked(Box<dyn Any + Send>),
}

/// Workers encoding batches of elements, and the batches in flight (see the module docs).
pub(super) struct Pipeline<'a> {
    /// Where batches go; dropped once the pipeline is, which ends the workers.
    jobs: Sender<Batch<'a>>,
    /// What the workers made, by batch number.
    done: Receiver<(u64, Done)>,
    /// Batches handed over, and appended.
    submitted: u64,
    appended: u64,
    /// Batches done but not yet appended (one finished before an earlier one).
    ready: BTreeMap<u64, Done>,
    /// The most batches in flight.
    window: u64,
    /// The batch being gathered ([`Pipeline::add`]): its elements, their bytes, and the
    /// field, type and depth of their run.
    batch: Vec<Occ<'a>>,
    batch_bytes: usize,
    run: (u32, TypeId, usize),
}

impl<'a> Pipeline<'a> {
    /// Starts `workers` threads in `scope`, each with an encoder of its own over `schema`
    /// (validating when `validate`: see [`super::encode_to_vec_validated`]).
    pub(super) fn start<'scope, 's>(
        scope: &'scope std::thread::Scope<'scope, '_>,
        schema: &'s Schema,
        workers: usize,
        validate: bool,
    ) -> Self
    where
        'a: 'scope,
        's: 'scope,
    {
        let (jobs, taken) = mpsc::channel::<Batch<'a>>();
        let (finished, done) = mpsc::channel();
        let taken = Arc::new(Mutex::new(taken));
        for _ in 0..workers.max(1) {
            let (taken, finished) = (Arc::clone(&taken), finished.clone());
            scope.spawn(move || {
                let mut sink = Count::default();
                let mut enc = Encoder::new(schema, &mut sink);
                enc.validate = validate;
                loop {
                    // The lock is held while waiting: one worker waits for the next batch,
                    // the others for that one to be taken.
                    let next = match taken.lock() {
                        Ok(taken) => taken.recv(),
                        Err(_) => return,
                    };
                    let Ok(batch) = next else {
                        return;
                    };
                    let seq = batch.seq;
                    let made = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        encode_batch(&mut enc, batch)
                    }));
                    let (done, stop) = match made {
                        Ok(encoded) => (Done::Encoded(encoded), false),
                        Err(panic) => (Done::Panicked(panic), true),
                    };
                    if finished.send((seq, done)).is_err() || stop {
                        return;
                    }
                }
            });
        }
        Self {
            jobs,
            done,
            submitted: 0,
            appended: 0,
            ready: BTreeMap::new(),
            window: (workers.max(1) * AHEAD_PER_WORKER) as u64,
            batch: Vec::new(),
            batch_bytes: 0,
            run: (0, TypeId(0), 0),
        }
    }

    /// Adds `element`, the next element of a run of field `number` of a message at `depth`
    /// (each a message of type `ty`), to the batch being gathered, which goes to the workers
    /// once it holds [`PARALLEL_BATCH`] bytes. An element of [`PARALLEL_AT`] bytes or more (a
    /// meta graph, and in it the graph) is large enough to have runs of its own: it is
    /// encoded on `enc`'s thread, after what is in flight, those runs on workers of their
    /// own. Returns the bytes appended to `enc`'s buffer meanwhile. Every element of a run
    /// is added before [`Pipeline::end_run`] ends it.
    pub(super) fn add<S: Sink>(
        &mut self,
        enc: &mut Encoder<'_, 'a, '_, S>,
        number: u32,
        ty: TypeId,
        depth: usize,
        element: Occ<'a>,
    ) -> Result<u64> {
        if element.data.len() >= PARALLEL_AT {
            let size = self.end_run(enc)?;
            return Ok(size + enc.child::<BUFFER>(number, &[element.data], ty, depth, &mut false)?);
        }
        self.run = (number, ty, depth);
        self.batch.push(element);
        self.batch_bytes += element.data.len();
        if self.batch_bytes < PARALLEL_BATCH {
            return Ok(0);
        }
        self.submit_batch(enc)
    }

    /// Ends the run being added ([`Pipeline::add`]): its last batch handed over, and every
    /// batch in flight appended to `enc`'s buffer, in order, since nothing else may be written
    /// before them. Returns the bytes appended; the first batch that failed, in order, is the
    /// error.
    pub(super) fn end_run<S: Sink>(&mut self, enc: &mut Encoder<'_, 'a, '_, S>) -> Result<u64> {
        let size = if self.batch.is_empty() {
            0
        } else {
            self.submit_batch(enc)?
        };
        Ok(size + self.drain(enc)?)
    }

    /// Hands the batch gathered to the workers ([`Pipeline::submit`]).
    fn submit_batch<S: Sink>(&mut self, enc: &mut Encoder<'_, 'a, '_, S>) -> Result<u64> {
        let (number, ty, depth) = self.run;
        let elements = std::mem::take(&mut self.batch);
        self.batch_bytes = 0;
        self.submit(enc, number, ty, depth, elements)
    }

    /// Hands `elements` (field `number` of a message at `depth`, each a message of type `ty`)
    /// to the workers; then, while more batches than the window are in flight, appends the
    /// earliest to `enc`'s buffer ([`Pipeline::drain`]). Returns the bytes appended.
    fn submit<S: Sink>(
        &mut self,
        enc: &mut Encoder<'_, 'a, '_, S>,
        number: u32,
        ty: TypeId,
        depth: usize,
        elements: Vec<Occ<'a>>,
    ) -> Result<u64> {
        let batch = Batch {
            seq: self.submitted,
            number,
            ty,
            depth,
            elements,
            out: enc.spares.pop().unwrap_or_default(),
        };
        self.submitted += 1;
        if let Err(mpsc::SendError(batch)) = self.jobs.send(batch) {
            // No worker is left (each ends only once this pipeline is dropped, or after
            // replying with a panic, which an earlier batch then carries on): encoded on this
            // thread.
            let mut sink = Count::default();
            let mut own = Encoder::new(enc.schema, &mut sink);
            own.validate = enc.validate;
            let done = Done::Encoded(encode_batch(&mut own, batch));
            self.ready.insert(self.submitted - 1, done);
        }
        let mut size = 0;
        while self.submitted - self.appended > self.window {
            size += self.append_next(enc)?;
        }
        Ok(size)
    }

    /// Appends to `enc`'s buffer, in the order they were handed over, the encodings of every
    /// batch in flight. Returns the bytes appended. The first batch that failed, in that
    /// order, is the error.
    fn drain<S: Sink>(&mut self, enc: &mut Encoder<'_, 'a, '_, S>) -> Result<u64> {
        let mut size = 0;
        while self.appended < self.submitted {
            size += self.append_next(enc)?;
        }
        Ok(size)
    }

    /// Appends the earliest batch in flight, waiting for it.
    fn append_next<S: Sink>(&mut self, enc: &mut Encoder<'_, 'a, '_, S>) -> Result<u64> {
        let done = loop {
            if let Some(done) = self.ready.remove(&self.appended) {
                break done;
            }
            match self.done.recv() {
                Ok((seq, done)) => {
                    self.ready.insert(seq, done);
                }
                // Every worker replies to each batch it takes before it ends, and ends only
                // once the pipeline is dropped or after replying with a panic, which is
                // carried on below before any other reply is awaited.
                Err(_) => unreachable!("a batch in flight with no worker left"),
            }
        };
        self.appended += 1;
        match done {
            Done::Encoded(encoded) => {
                let (size, bytes) = encoded?;
                enc.tmp.extend_from_slice(&bytes);
                enc.spares.push(bytes);
                Ok(size)
            }
            Done::Panicked(panic) => std::panic::resume_unwind(panic),
        }
    }
}

/// Encodes the elements of `batch` into its buffer, each as its field in canonical form:
/// their size and the buffer.
fn encode_batch<'a>(
    enc: &mut Encoder<'_, 'a, '_, Count>,
    batch: Batch<'a>,
) -> Result<(u64, Vec<u8>)> {
    enc.tmp = batch.out;
    enc.tmp.clear();
    // The fast walk may give up on as many bytes as the batch holds (see `fast_budget`).
    enc.fast_budget = batch.elements.iter().map(|o| o.data.len()).sum();
    let mut size = 0;
    for o in &batch.elements {
        size += enc.child::<BUFFER>(batch.number, &[o.data], batch.ty, batch.depth, &mut false)?;
    }
    Ok((size, std::mem::take(&mut enc.tmp)))
}
