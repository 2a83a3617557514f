//! Locating and reading a SavedModel directory: which file holds the model ([`model_file`],
//! the one place that decides it), the model files passed over, the descriptors of our schema,
//! and the model proto read whole ([`read_saved_model`]). The bottom of the crate's flow:
//! every report, `verify` and the writers start here, and this module imports none of them.

use std::fmt;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use prost_reflect::{DynamicMessage, MessageDescriptor};
use unbound_chunked::{parse_pb, FileChunks, Merger};
use unbound_proto::tensorflow::proto_splitter::ChunkMetadata;
use unbound_records::{RecordReader, RecordsError};
use unbound_wire::text_depth::{text_nesting_past, TEXT_RECURSION_LIMIT};
use unbound_wire::WireMessage;

use crate::error::{Result, SavedModelError};
use crate::format::{ModelFormat, FINGERPRINT_FILE};

/// The file of a SavedModel directory that holds the model proto.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelFile {
    /// Its path (the directory as given, joined with the file name).
    pub path: PathBuf,
    /// Its format.
    pub format: ModelFormat,
}

/// The `tensorflow.SavedModel` descriptor.
pub fn saved_model_descriptor() -> Result<MessageDescriptor> {
    message_descriptor("tensorflow.SavedModel")
}

/// A message descriptor from our pool by full name.
pub fn message_descriptor(name: &str) -> Result<MessageDescriptor> {
    unbound_proto::descriptor_pool()
        .get_message_by_name(name)
        .ok_or_else(|| SavedModelError::UnknownType(name.to_string()))
}

/// Which file of `dir` holds the model: `saved_model.cpb`, else `.pb`, else `.pbtxt`. The
/// one place that decides it (show, verify, fingerprint, split, merge and vars all ask here).
pub fn model_file(dir: &Path) -> Result<ModelFile> {
    if !dir.is_dir() {
        return Err(SavedModelError::NotADirectory {
            dir: dir.to_path_buf(),
        });
    }
    ModelFormat::SEARCH_ORDER
        .into_iter()
        .map(|format| ModelFile {
            path: dir.join(format.file_name()),
            format,
        })
        .find(|f| f.path.is_file())
        .ok_or_else(|| SavedModelError::NoModelFile {
            dir: dir.to_path_buf(),
        })
}

/// The model files of `dir` that [`model_file`] passes over because one earlier in
/// [`ModelFormat::SEARCH_ORDER`] exists (a `saved_model.pb` beside a `saved_model.cpb`):
/// nothing reads them, which users should be told. Empty when there is no model file.
pub fn unused_model_files(dir: &Path) -> Vec<PathBuf> {
    SavedModel::open(dir)
        .map(|model| model.passed_over().iter().map(|f| f.path.clone()).collect())
        .unwrap_or_default()
}

/// A SavedModel directory, opened: which file holds the model (and which model files are
/// passed over), whether it has variables, assets and a `fingerprint.pb`, resolved once, and
/// the model file mapped once, on first use, for every reader that works from it. The value
/// every reading command starts from (`show`, `verify`, `fingerprint`, and the input side of
/// `split`, `merge` and the rewrites).
///
/// It holds the model file's bytes only: facts derived from them (a fingerprint, whether they
/// are canonical) are computed by the passes that need them, from these same bytes.
pub struct SavedModel {
    /// The directory, as given.
    dir: PathBuf,
    /// The model file read: `saved_model.cpb`, else `.pb`, else `.pbtxt`.
    file: ModelFile,
    /// The other model files present, which TensorFlow (and so every command) ignores.
    passed_over: Vec<ModelFile>,
    /// `variables/variables.index`, when it is a file.
    variables_index: Option<PathBuf>,
    /// `assets/`, when it is a directory.
    assets: Option<PathBuf>,
    /// `fingerprint.pb`, when something is there by that name.
    fingerprint: Option<PathBuf>,
    /// The model file's content, mapped on first use (a lock, not a `OnceLock`: readers on two
    /// threads asking first must not both map it).
    data: Mutex<Option<Bytes>>,
    /// Whether `data` holds the canonical form of a `.pb` made in memory
    /// ([`crate::fingerprint::in_canonical_form`]) rather than the file's bytes.
    canonicalized: bool,
}

impl fmt::Debug for SavedModel {
    /// The resolved layout, and of the mapping only its length (the model may be gigabytes).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SavedModel")
            .field("dir", &self.dir)
            .field("file", &self.file)
            .field("passed_over", &self.passed_over)
            .field("variables_index", &self.variables_index)
            .field("assets", &self.assets)
            .field("fingerprint", &self.fingerprint)
            .field("canonicalized", &self.canonicalized)
            .field(
                "mapped_bytes",
                &self
                    .data
                    .lock()
                    .map(|data| data.as_ref().map(Bytes::len))
                    .ok()
                    .flatten(),
            )
            .finish()
    }
}

impl SavedModel {
    /// Opens the SavedModel directory `dir`: finds its model file as TensorFlow does
    /// (`saved_model.cpb`, then `.pb`, then `.pbtxt`; [`SavedModelError::NotADirectory`] or
    /// [`SavedModelError::NoModelFile`] when there is none) and looks for its variables,
    /// assets and fingerprint. Nothing is read yet: the model file is mapped by the first
    /// reader, so that a file that cannot be mapped is reported by the reader that needs it.
    pub fn open(dir: &Path) -> Result<Self> {
        let file = model_file(dir)?;
        let present = |path: PathBuf| fs::symlink_metadata(&path).is_ok().then_some(path);
        let passed_over = ModelFormat::SEARCH_ORDER
            .into_iter()
            .filter(|&f| f != file.format)
            .filter_map(|format| {
                present(dir.join(format.file_name())).map(|path| ModelFile { path, format })
            })
            .collect();
        let variables_index = dir.join("variables").join("variables.index");
        let assets = dir.join("assets");
        Ok(Self {
            dir: dir.to_path_buf(),
            file,
            passed_over,
            variables_index: variables_index.is_file().then_some(variables_index),
            assets: assets.is_dir().then_some(assets),
            fingerprint: present(dir.join(FINGERPRINT_FILE)),
            data: Mutex::new(None),
            canonicalized: false,
        })
    }

    /// This model read from `canonical`, the canonical form of its `.pb` (the file's message,
    /// serialized as protobuf C++ serializes it deterministically), in place of the file's
    /// bytes: every reader then works from those bytes ([`SavedModel::data`]), and
    /// [`SavedModel::canonicalized`] says so, for a writer that would copy the file.
    pub(crate) fn reading(self, canonical: Bytes) -> Self {
        Self {
            data: Mutex::new(Some(canonical)),
            canonicalized: true,
            ..self
        }
    }

    /// Whether [`SavedModel::data`] is the canonical form of the model file made in memory
    /// ([`crate::fingerprint::in_canonical_form`]), not the file's own bytes: a writer copies
    /// those bytes, not the file. Those bytes were made by the validating encoder
    /// (`fingerprint::streamed::canonical_model`), which refused the file had protobuf C++
    /// refused to parse it: they are canonical and valid by construction, and verify takes
    /// them so without checking them again.
    pub fn canonicalized(&self) -> bool {
        self.canonicalized
    }

    /// The directory, as given.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The model file read (its path is the directory as given joined with its name).
    pub fn model_file(&self) -> &ModelFile {
        &self.file
    }

    /// The model file's format.
    pub fn format(&self) -> ModelFormat {
        self.file.format
    }

    /// The model files beside the one read, in [`ModelFormat::SEARCH_ORDER`]: nothing reads
    /// them (TensorFlow neither), which users should be told and `verify` checks.
    pub fn passed_over(&self) -> &[ModelFile] {
        &self.passed_over
    }

    /// `variables/variables.index`, when the model has one (its checkpoint's index).
    pub fn variables_index(&self) -> Option<&Path> {
        self.variables_index.as_deref()
    }

    /// `assets/`, when the model has that directory.
    pub fn assets_dir(&self) -> Option<&Path> {
        self.assets.as_deref()
    }

    /// `fingerprint.pb`, when the directory holds something by that name (whether it reads is
    /// for its reader to say).
    pub fn fingerprint_file(&self) -> Option<&Path> {
        self.fingerprint.as_deref()
    }

    /// The model file's content: mapped on the first call ([`unbound_io::map_file`]: a FIFO
    /// or device in its place is refused), the same bytes for every later one (or, once
    /// [`SavedModel::canonicalized`], its canonical form). A mapping that fails is not kept:
    /// the error goes to the caller.
    pub fn data(&self) -> Result<Bytes> {
        let mut data = self.data.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(data) = &*data {
            return Ok(data.clone());
        }
        let mapped = unbound_io::map_file(&self.file.path)?;
        *data = Some(mapped.clone());
        Ok(mapped)
    }

    /// The records of the model file (a `.cpb`), read from its mapping. A file that does not
    /// map, or is empty, is opened by its path instead, so that the refusal is the record
    /// reader's own ([`RecordReader::open`]).
    pub fn records(&self) -> std::result::Result<RecordReader, RecordsError> {
        match self.data() {
            Ok(data) if !data.is_empty() => {
                RecordReader::from_bytes(data, self.file.path.display().to_string())
            }
            _ => RecordReader::open(&self.file.path),
        }
    }

    /// The chunks of the model file (a `.cpb`) and its chunk metadata, read from its mapping:
    /// [`FileChunks::open`] of the file.
    pub fn chunks(&self) -> Result<(FileChunks, ChunkMetadata)> {
        Ok(FileChunks::from_reader(Arc::new(self.records()?))?)
    }

    /// The SavedModel proto, read whole: a `.cpb` merged, a `.pb` parsed one level deep (its
    /// nested messages stay slices of the mapping), a `.pbtxt` parsed.
    pub fn read(&self) -> Result<SavedModelFile> {
        let desc = saved_model_descriptor()?;
        let (message, metadata) = match self.file.format {
            ModelFormat::Cpb => {
                let (mut chunks, metadata) = self.chunks()?;
                let root = metadata.message.clone().unwrap_or_default();
                chunks.stream_ahead(&desc, &root);
                let message = Merger::new(&chunks).merge(&desc, &root)?;
                (message, Some(metadata))
            }
            ModelFormat::Pb => (self.read_pb(&desc)?, None),
            ModelFormat::Pbtxt => (parse_text(&self.data()?, &self.file.path, &desc)?, None),
        };
        Ok(SavedModelFile {
            message,
            file: self.file.clone(),
            metadata,
        })
    }

    /// The model file (a `.pb`) parsed one level deep as a `desc`, from its mapping: a
    /// reading of its own, as [`unbound_chunked::read_pb`] of the file gives.
    pub fn read_pb(&self, desc: &MessageDescriptor) -> Result<WireMessage> {
        Ok(parse_pb(&self.data()?, &self.file.path, desc)?)
    }

    /// The model file (a `.pbtxt`) parsed as a `desc`, from its mapping.
    pub fn read_text(&self, desc: &MessageDescriptor) -> Result<WireMessage> {
        parse_text(&self.data()?, &self.file.path, desc)
    }
}

/// A SavedModel proto as read by [`read_saved_model`].
#[derive(Debug)]
pub struct SavedModelFile {
    /// The merged message.
    pub message: WireMessage,
    /// The file it was read from.
    pub file: ModelFile,
    /// The chunk metadata of a `.cpb`.
    pub metadata: Option<ChunkMetadata>,
}

/// Reads the SavedModel proto of `dir`, preferring `.cpb`, then `.pb`, then `.pbtxt`
/// ([`SavedModel::open`], then [`SavedModel::read`]).
pub fn read_saved_model(dir: &Path) -> Result<SavedModelFile> {
    SavedModel::open(dir)?.read()
}

/// Parses a text-format message file.
pub fn read_text(path: &Path, desc: &MessageDescriptor) -> Result<WireMessage> {
    // Mapped: a FIFO or device in its place is refused instead of read forever.
    parse_text(&unbound_io::map_file(path)?, path, desc)
}

/// [`read_text`] of the content `bytes` of `path`, already mapped.
fn parse_text(bytes: &Bytes, path: &Path, desc: &MessageDescriptor) -> Result<WireMessage> {
    let text = std::str::from_utf8(bytes).map_err(|e| SavedModelError::TextFormat {
        path: path.to_path_buf(),
        fault: format!("not UTF-8 text: {e}"),
    })?;
    // The parser recurses without a limit: nesting is bounded before it runs.
    if let Some(at) = text_nesting_past(bytes, TEXT_RECURSION_LIMIT) {
        return Err(SavedModelError::TextFormat {
            path: path.to_path_buf(),
            fault: format!("messages nested more than {TEXT_RECURSION_LIMIT} deep (at byte {at})"),
        });
    }
    let msg = DynamicMessage::parse_text_format(desc.clone(), text).map_err(|e| {
        SavedModelError::TextFormat {
            path: path.to_path_buf(),
            fault: e.to_string(),
        }
    })?;
    let bytes = bytes::Bytes::from(prost::Message::encode_to_vec(&msg));
    WireMessage::parse(&bytes, Some(desc.clone()))
        .map_err(|error| SavedModelError::malformed(path.display().to_string(), error))
}

#[cfg(test)]
mod tests {
    use super::*;
    use unbound_test_support::testdata::model as testdata;

    /// A copy of the bundled `tf2_multi_sig` (a `.pb`, its variables and fingerprint) in `dir`.
    fn copy_model(dir: &Path) {
        let src = testdata("tf2_multi_sig");
        fs::create_dir_all(dir.join("variables")).unwrap();
        for name in ["saved_model.pb", "fingerprint.pb"] {
            fs::copy(src.join(name), dir.join(name)).unwrap();
        }
        for entry in fs::read_dir(src.join("variables")).unwrap() {
            let entry = entry.unwrap();
            fs::copy(entry.path(), dir.join("variables").join(entry.file_name())).unwrap();
        }
    }

    #[test]
    fn open_resolves_the_directory_and_maps_the_model_file_once() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("model");
        copy_model(&dir);
        fs::write(dir.join("saved_model.pbtxt"), "stale").unwrap();
        let model = SavedModel::open(&dir).unwrap();
        assert_eq!(model.format(), ModelFormat::Pb);
        assert_eq!(model.model_file(), &model_file(&dir).unwrap());
        let passed: Vec<&Path> = model
            .passed_over()
            .iter()
            .map(|f| f.path.as_path())
            .collect();
        assert_eq!(passed, [dir.join("saved_model.pbtxt")]);
        assert_eq!(unused_model_files(&dir), [dir.join("saved_model.pbtxt")]);
        assert_eq!(
            model.variables_index(),
            Some(dir.join("variables/variables.index").as_path())
        );
        assert_eq!(model.assets_dir(), None);
        assert_eq!(
            model.fingerprint_file(),
            Some(dir.join(FINGERPRINT_FILE).as_path())
        );
        // One mapping, the same bytes for every reader.
        let (first, again) = (model.data().unwrap(), model.data().unwrap());
        assert_eq!(first.as_ptr(), again.as_ptr());
        assert_eq!(first, fs::read(dir.join("saved_model.pb")).unwrap());
        let read = model.read().unwrap().message.to_vec().unwrap();
        let desc = saved_model_descriptor().unwrap();
        let alone = unbound_chunked::read_pb(&dir.join("saved_model.pb"), &desc).unwrap();
        assert_eq!(read, alone.to_vec().unwrap());
        // A `.cpb` wins over the `.pb`, which is then passed over.
        fs::write(dir.join("saved_model.cpb"), b"").unwrap();
        let model = SavedModel::open(&dir).unwrap();
        assert_eq!(model.format(), ModelFormat::Cpb);
        assert_eq!(model.passed_over().len(), 2);
    }

    #[test]
    fn open_refuses_what_model_file_refuses() {
        let tmp = tempfile::tempdir().unwrap();
        assert!(matches!(
            SavedModel::open(tmp.path()),
            Err(SavedModelError::NoModelFile { .. })
        ));
        assert!(matches!(
            SavedModel::open(&tmp.path().join("missing")),
            Err(SavedModelError::NotADirectory { .. })
        ));
        assert!(unused_model_files(tmp.path()).is_empty());
    }
}
