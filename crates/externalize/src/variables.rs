//! The output's `variables/`: the source's checkpoint with the new variables beside its own,
//! in one data shard: the source's tensors are copied as stored (their index entries kept but
//! for where they now lie), the new values streamed from the model after them; an object-based checkpoint's object graph gets the new
//! variables (children of the root, as the model's object graph has them). The index is then
//! written as TensorFlow's `BundleWriter` writes it.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};

use prost::Message;
use unbound_bundle::{index_path, BundleReader, ShardWriter, Tensor, TensorData, OBJECT_GRAPH_KEY};
use unbound_proto::tensorflow::{
    trackable_object_graph::{
        trackable_object::{ObjectReference, SerializedTensor},
        TrackableObject,
    },
    BundleEntryProto, TrackableObjectGraph,
};

use crate::error::{ExternalizeError, Result};
use crate::graph_edit::{NewVariable, Value};
use crate::one_pass::{in_record, stream_span, values_in_one_record, SpanFault};
use crate::restore::VARIABLE_VALUE_SUFFIX;
use crate::spool::{punch_hole, Spooled, SpooledValues, ValueAt};
use unbound_wire::Payload;

/// What is written, once the model is: the new variables and their keys, and whether the
/// checkpoint's object graph gets them.
pub(crate) struct PendingVariables {
    /// The source's checkpoint prefix, if it has one.
    pub source: Option<PathBuf>,
    /// Each new variable and its checkpoint key.
    pub variables: Vec<(String, NewVariable)>,
    /// Whether the variables join the checkpoint's object graph (a TF2 model).
    pub object_based: bool,
    /// Values written as the source was verified ([`crate::spool`]), if any.
    pub spooled: Option<SpooledValues>,
}

/// Block size of the streamed copy of a value into its data shard.
const BLOCK: usize = 8 << 20;

/// Writes `dir/variables/` as the module doc says.
pub(crate) fn write_variables(dir: &Path, mut pending: PendingVariables) -> Result<()> {
    let prefix = unbound_bundle::saved_model_prefix(dir);
    let source = match &pending.source {
        Some(p) => Some(BundleReader::open(p)?),
        None => None,
    };
    let mut entries: BTreeMap<Vec<u8>, BundleEntryProto> = BTreeMap::new();
    let variables_dir = dir.join("variables");
    std::fs::create_dir_all(&variables_dir)
        .map_err(|e| unbound_savedmodel::SavedModelError::io(&variables_dir, e))?;
    let spooled = pending.spooled.take();
    let (mut writer, taken_from_spool) = match spooled {
        Some(spooled) => adopt_spool(&prefix, spooled, &pending.variables)?,
        None => (ShardWriter::create(&prefix, 0, 1)?, HashMap::new()),
    };
    if let (Some(reader), Some(src_prefix)) = (&source, &pending.source) {
        for key in reader.keys() {
            let Some(entry) = reader.entry(key) else {
                continue;
            };
            if pending.object_based && key == OBJECT_GRAPH_KEY.as_bytes() {
                continue; // written anew below
            }
            if !entry.slices.is_empty() {
                // A partitioned tensor's entry holds no bytes: its slices do.
                entries.insert(key.to_vec(), entry.clone());
                continue;
            }
            // The stored bytes as they are (the source was verified, CRCs included): the
            // entry keeps its checksum, which for strings is not that of the raw bytes.
            let bytes = reader.mapped(key, false)?;
            let mut copied = writer.append_with(entry.dtype, &[], |sink| {
                for block in bytes.chunks(BLOCK) {
                    sink.write(block)?;
                }
                Ok::<_, unbound_bundle::BundleError>(())
            })?;
            copied.shape = entry.shape.clone();
            copied.crc32c = entry.crc32c;
            copied.slices = entry.slices.clone();
            entries.insert(key.to_vec(), copied);
        }
        copy_other_files(src_prefix, reader, &variables_dir)?;
    }
    let taken = |entries: &BTreeMap<Vec<u8>, BundleEntryProto>, key: &str| {
        if entries.contains_key(key.as_bytes()) {
            return Err(ExternalizeError::invalid(
                prefix.display().to_string(),
                format!("the checkpoint already holds a tensor {key:?}"),
            ));
        }
        Ok(())
    };
    for (i, place) in &taken_from_spool {
        let (key, var) = &pending.variables[*i];
        taken(&entries, key)?;
        let entry = writer.entry_at(var.dtype, &var.shape, place.offset, var.bytes, place.crc)?;
        entries.insert(key.as_bytes().to_vec(), entry);
    }
    let left: Vec<(String, NewVariable)> = pending
        .variables
        .iter()
        .enumerate()
        .filter(|(i, _)| !taken_from_spool.contains_key(i))
        .map(|(_, v)| v.clone())
        .collect();
    let mut rest = &left[..];
    while let Some((key, var)) = rest.first() {
        let together = values_in_one_record(rest);
        if together > 1 {
            let (group, after) = rest.split_at(together);
            for (key, _) in group {
                taken(&entries, key)?;
            }
            write_from_one_record(&mut writer, group, &mut entries, &prefix)?;
            rest = after;
            continue;
        }
        rest = &rest[1..];
        taken(&entries, key)?;
        let entry = match &var.value {
            Value::Raw(Payload::Inline(bytes)) => {
                writer.append_with(var.dtype, &var.shape, |sink| {
                    for block in bytes.chunks(BLOCK) {
                        sink.write(block)?;
                    }
                    Ok::<_, unbound_bundle::BundleError>(())
                })?
            }
            // Streamed from the `.cpb`'s record, never whole in memory.
            Value::Raw(payload) => writer.append_with(var.dtype, &var.shape, |sink| {
                let mut out = SinkWriter { sink, fault: None };
                let streamed = payload.write_to(&mut out);
                if let Some(fault) = out.fault {
                    return Err(ExternalizeError::Bundle(fault));
                }
                streamed.map_err(|e| {
                    ExternalizeError::invalid(
                        prefix.display().to_string(),
                        format!("reading the value of {key:?} from the model: {e}"),
                    )
                })
            })?,
            Value::Strings(values) => {
                writer.append_tensor(&Tensor::strings(var.shape.clone(), values.clone()))?
            }
        };
        entries.insert(key.as_bytes().to_vec(), entry);
    }
    if pending.object_based {
        let mut graph = source
            .as_ref()
            .map(BundleReader::object_graph)
            .transpose()?
            .flatten()
            .unwrap_or_else(|| TrackableObjectGraph {
                nodes: vec![TrackableObject::default()],
            });
        if graph.nodes.is_empty() {
            graph.nodes.push(TrackableObject::default());
        }
        let first = graph.nodes.len() as i32;
        for (i, (key, var)) in pending.variables.iter().enumerate() {
            graph.nodes.push(TrackableObject {
                attributes: vec![SerializedTensor {
                    name: "VARIABLE_VALUE".into(),
                    full_name: var.name.clone(),
                    checkpoint_key: key.clone(),
                }],
                has_checkpoint_values: Some(true),
                ..TrackableObject::default()
            });
            graph.nodes[0].children.push(ObjectReference {
                node_id: first + i as i32,
                local_name: var.local_name.clone(),
            });
        }
        graph.nodes[0].has_checkpoint_values = Some(true);
        let tensor = Tensor {
            dtype: unbound_proto::tensorflow::DataType::DtString as i32,
            shape: Vec::new(),
            data: TensorData::Strings(vec![graph.encode_to_vec().into()]),
        };
        let entry = writer.append_tensor(&tensor)?;
        entries.insert(OBJECT_GRAPH_KEY.as_bytes().to_vec(), entry);
    }
    writer.finish()?.persist()?;
    unbound_bundle::write_index(&prefix, 1, &entries)?;
    Ok(())
}

/// The data shard over the spooled values (moved into place: [`ShardWriter::adopt`]), and
/// which of `variables` (by index) take their values from it, where they lie there; the
/// spooled values none takes are cut out of the file. Without any taken, the spool is
/// dropped (removed) and a shard created.
fn adopt_spool(
    prefix: &Path,
    spooled: SpooledValues,
    variables: &[(String, NewVariable)],
) -> Result<(ShardWriter, HashMap<usize, Spooled>)> {
    let mut taken = HashMap::new();
    let mut used = HashSet::new();
    for (i, (_, var)) in variables.iter().enumerate() {
        let Some(place) = in_record(var) else {
            continue;
        };
        let at = ValueAt {
            position: place.position,
            offset: place.offset,
            len: place.len,
        };
        if let Some(spooled) = spooled.values.get(&at) {
            taken.insert(i, *spooled);
            used.insert(at);
        }
    }
    if taken.is_empty() {
        return Ok((ShardWriter::create(prefix, 0, 1)?, taken));
    }
    for (at, place) in &spooled.values {
        if !used.contains(at) {
            punch_hole(&spooled.file, place.offset, at.len);
        }
    }
    drop(spooled.file);
    let writer = ShardWriter::adopt(prefix, 0, 1, spooled.tmp.path())?;
    Ok((writer, taken))
}

/// Writes the values of `group` (variables whose values lie in one record, in order:
/// [`values_in_one_record`]) as checkpoint entries, in one pass over the record.
fn write_from_one_record(
    writer: &mut ShardWriter,
    group: &[(String, NewVariable)],
    entries: &mut BTreeMap<Vec<u8>, BundleEntryProto>,
    prefix: &Path,
) -> Result<()> {
    let places: Vec<_> = group.iter().filter_map(|(_, var)| in_record(var)).collect();
    let (Some(first), Some(last)) = (places.first(), places.last()) else {
        return Ok(());
    };
    let start = first.offset;
    let span = last.offset + last.len - start;
    let streamed = stream_span(first.file, first.position, start, span, |reader| {
        let mut at = start;
        for ((key, var), place) in group.iter().zip(&places) {
            let entry = writer.append_with(var.dtype, &var.shape, |sink| {
                let mut out = SinkWriter { sink, fault: None };
                let copied = reader
                    .skip(place.offset - at)
                    .and_then(|()| reader.copy_to(place.len, &mut out));
                match out.fault {
                    Some(fault) => Err(ExternalizeError::Bundle(fault)),
                    None => copied.map_err(|e| {
                        ExternalizeError::invalid(
                            prefix.display().to_string(),
                            format!("reading the value of {key:?} from the model: {e}"),
                        )
                    }),
                }
            })?;
            entries.insert(key.as_bytes().to_vec(), entry);
            at = place.offset + place.len;
        }
        Ok::<_, ExternalizeError>(())
    });
    streamed.map_err(|fault| match fault {
        SpanFault::Consumer(e) => e,
        SpanFault::Stream(e) => ExternalizeError::invalid(
            prefix.display().to_string(),
            format!("reading the values of {} from the model: {e}", group[0].0),
        ),
    })
}

/// A value's bytes streamed into a checkpoint entry, the entry's first fault kept.
struct SinkWriter<'a, 'b> {
    sink: &'a mut unbound_bundle::EntrySink<'b>,
    fault: Option<unbound_bundle::BundleError>,
}

impl std::io::Write for SinkWriter<'_, '_> {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        self.sink.write(data).map_err(|e| {
            let message = e.to_string();
            self.fault = Some(e);
            std::io::Error::other(message)
        })?;
        Ok(data.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The checkpoint key of `var`: under its local name in an object-based checkpoint, its name
/// in a name-based one.
pub(crate) fn checkpoint_key(var: &NewVariable, object_based: bool) -> String {
    if object_based {
        format!("{}{VARIABLE_VALUE_SUFFIX}", var.local_name)
    } else {
        var.name.clone()
    }
}

/// Copies `from` to `to` (by the kernel): files of `variables/` other than the bundle.
fn copy_file(from: &Path, to: &Path) -> Result<()> {
    std::fs::copy(from, to).map_err(|e| unbound_savedmodel::SavedModelError::io(from, e))?;
    Ok(())
}

/// Copies the files of the source's `variables/` that are not its bundle (index and data
/// shards) into `out`.
fn copy_other_files(src_prefix: &Path, reader: &BundleReader, out: &Path) -> Result<()> {
    let Some(dir) = src_prefix.parent() else {
        return Ok(());
    };
    let bundle: Vec<PathBuf> = std::iter::once(index_path(src_prefix))
        .chain((0..reader.num_shards()).map(|i| reader.data_path(i)))
        .collect();
    let entries =
        std::fs::read_dir(dir).map_err(|e| unbound_savedmodel::SavedModelError::io(dir, e))?;
    for entry in entries {
        let entry = entry.map_err(|e| unbound_savedmodel::SavedModelError::io(dir, e))?;
        let path = entry.path();
        if bundle.contains(&path) || !path.is_file() {
            continue;
        }
        copy_file(&path, &out.join(entry.file_name()))?;
    }
    Ok(())
}
