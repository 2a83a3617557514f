//! The check a plugin file passes before the dynamic loader sees it ([`check_shared_object`]):
//! a regular file, an ELF shared object for the machine unbound runs on, whose program and
//! section headers and whose segments lie inside the file. The loader maps a segment that
//! runs past the end of a truncated file and the process dies of SIGBUS on touching it, with
//! no message; refused here, the user is told which file is wrong and how.

use std::path::Path;

use crate::error::PluginFault;

/// `\x7fELF`.
const MAGIC: &[u8; 4] = b"\x7fELF";
/// `e_ident[EI_CLASS]` of this machine's objects: `ELFCLASS64` (2) or `ELFCLASS32` (1).
const CLASS: u8 = if cfg!(target_pointer_width = "64") {
    2
} else {
    1
};
/// `e_ident[EI_DATA]` of this machine: `ELFDATA2LSB` (1) or `ELFDATA2MSB` (2).
const DATA: u8 = if cfg!(target_endian = "little") { 1 } else { 2 };
/// `e_type` of a shared object.
const ET_DYN: u16 = 3;
/// `p_type` of a loadable segment.
const PT_LOAD: u32 = 1;
/// `sh_type` of a section with no bytes in the file (`.bss`).
const SHT_NOBITS: u32 = 8;

/// `e_machine` of this machine, when unbound knows it (otherwise it is not checked).
const MACHINE: Option<u16> = if cfg!(target_arch = "x86_64") {
    Some(62)
} else if cfg!(target_arch = "aarch64") {
    Some(183)
} else if cfg!(target_arch = "x86") {
    Some(3)
} else if cfg!(target_arch = "arm") {
    Some(40)
} else if cfg!(target_arch = "powerpc64") {
    Some(21)
} else if cfg!(target_arch = "riscv64") {
    Some(243)
} else if cfg!(target_arch = "s390x") {
    Some(22)
} else {
    None
};

/// Refuses the plugin file at `path` unless it is a regular file (symbolic links followed)
/// holding an ELF shared object for this machine whose headers, sections and loadable
/// segments all lie inside the file. Says what is wrong; the caller names the file.
pub fn check_shared_object(path: &Path) -> Result<(), PluginFault> {
    let bytes = unbound_io::map_file(path).map_err(|e| match e {
        unbound_io::IoError::Os { source, .. } if source.kind() == std::io::ErrorKind::NotFound => {
            PluginFault::NoSuchFile
        }
        unbound_io::IoError::NotRegularFile { kind, .. } => PluginFault::NotRegularFile(kind),
        other => PluginFault::Unreadable(other.to_string()),
    })?;
    check_shared_object_bytes(&bytes)
}

/// The checks of [`check_shared_object`] on the bytes of a plugin file already read: `Ok`, or
/// [`PluginFault::NotSharedObject`] saying what is wrong.
pub fn check_shared_object_bytes(bytes: &[u8]) -> Result<(), PluginFault> {
    check_elf(bytes).map_err(PluginFault::NotSharedObject)
}

/// The checks of [`check_shared_object`] on the file's bytes; the fault as a phrase.
fn check_elf(bytes: &[u8]) -> Result<(), String> {
    let len = bytes.len() as u64;
    if bytes.len() < 16 || &bytes[..4] != MAGIC {
        return Err("not an ELF file".into());
    }
    if bytes[4] != CLASS {
        return Err(format!(
            "an ELF file of class {}, not this machine's ({}-bit)",
            bytes[4],
            if CLASS == 2 { 64 } else { 32 }
        ));
    }
    if bytes[5] != DATA {
        return Err("an ELF file of the other byte order than this machine's".into());
    }
    let elf = Reader { bytes };
    let wide = CLASS == 2;
    let header_len = if wide { 64 } else { 52 };
    if len < header_len {
        return Err(format!(
            "truncated: {len} bytes, shorter than the {header_len}-byte ELF header"
        ));
    }
    let e_type = elf.u16(16)?;
    if e_type != ET_DYN {
        return Err(format!(
            "an ELF file of type {e_type}, not a shared object (type {ET_DYN})"
        ));
    }
    let machine = elf.u16(18)?;
    if let Some(expected) = MACHINE.filter(|&m| m != machine) {
        return Err(format!(
            "an ELF shared object for machine {machine}, not this one ({expected})"
        ));
    }
    let (phoff, shoff, at) = if wide {
        (elf.u64(32)?, elf.u64(40)?, 52)
    } else {
        (elf.u32(28)?.into(), elf.u32(32)?.into(), 40)
    };
    let phentsize = u64::from(elf.u16(at + 2)?);
    let phnum = u64::from(elf.u16(at + 4)?);
    let shentsize = u64::from(elf.u16(at + 6)?);
    let mut shnum = u64::from(elf.u16(at + 8)?);
    let (ph_size, sh_size) = if wide { (56, 64) } else { (32, 40) };
    if phnum == 0 {
        return Err("no program headers: nothing to load".into());
    }
    if phentsize != ph_size {
        return Err(format!(
            "program header entries of {phentsize} bytes, not {ph_size}"
        ));
    }
    inside(len, phoff, phnum * phentsize, "the program headers")?;
    for i in 0..phnum {
        let h = phoff + i * phentsize;
        let p_type = elf.u32(h)?;
        let (offset, filesz) = if wide {
            (elf.u64(h + 8)?, elf.u64(h + 32)?)
        } else {
            (elf.u32(h + 4)?.into(), elf.u32(h + 16)?.into())
        };
        if p_type == PT_LOAD || filesz > 0 {
            inside(len, offset, filesz, &format!("segment {i}"))?;
        }
    }
    if shoff == 0 {
        return Ok(()); // no section headers (they are optional for loading)
    }
    if shentsize != sh_size {
        return Err(format!(
            "section header entries of {shentsize} bytes, not {sh_size}"
        ));
    }
    inside(len, shoff, shentsize, "the section headers")?;
    if shnum == 0 {
        // Extended numbering: the count is section 0's sh_size.
        shnum = if wide {
            elf.u64(shoff + 32)?
        } else {
            elf.u32(shoff + 20)?.into()
        };
    }
    let table = shnum
        .checked_mul(shentsize)
        .ok_or_else(|| format!("{shnum} section headers: more than a file can hold"))?;
    inside(len, shoff, table, "the section headers")?;
    for i in 0..shnum {
        let h = shoff + i * shentsize;
        let sh_type = elf.u32(h + 4)?;
        let (offset, size) = if wide {
            (elf.u64(h + 24)?, elf.u64(h + 32)?)
        } else {
            (elf.u32(h + 16)?.into(), elf.u32(h + 20)?.into())
        };
        if sh_type != SHT_NOBITS && sh_type != 0 {
            inside(len, offset, size, &format!("section {i}"))?;
        }
    }
    Ok(())
}

/// `Ok` when `size` bytes at `offset` lie inside a file of `len` bytes; else the fault,
/// naming `what` ("truncated": the usual cause).
fn inside(len: u64, offset: u64, size: u64, what: &str) -> Result<(), String> {
    match offset.checked_add(size) {
        Some(end) if end <= len => Ok(()),
        _ => Err(format!(
            "truncated or damaged: {what} at bytes {offset}..{}, past the end of the file \
             ({len} bytes)",
            offset.saturating_add(size)
        )),
    }
}

/// Fixed-size fields of the file, read in this machine's byte order (checked to be the file's).
struct Reader<'a> {
    bytes: &'a [u8],
}

impl Reader<'_> {
    fn field<const N: usize>(&self, at: u64) -> Result<[u8; N], String> {
        usize::try_from(at)
            .ok()
            .and_then(|at| self.bytes.get(at..at.checked_add(N)?))
            .and_then(|b| b.try_into().ok())
            .ok_or_else(|| {
                format!(
                    "truncated: a header field at byte {at} lies past the end of the file ({} \
                     bytes)",
                    self.bytes.len()
                )
            })
    }
    fn u16(&self, at: u64) -> Result<u16, String> {
        self.field(at).map(u16::from_ne_bytes)
    }
    fn u32(&self, at: u64) -> Result<u32, String> {
        self.field(at).map(u32::from_ne_bytes)
    }
    fn u64(&self, at: u64) -> Result<u64, String> {
        self.field(at).map(u64::from_ne_bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// This test executable: an ELF file for this machine, though not a shared object
    /// (a position-independent executable is of type ET_DYN too).
    fn own_executable() -> Vec<u8> {
        std::fs::read(std::env::current_exe().unwrap()).unwrap()
    }

    #[test]
    fn refuses_what_is_not_elf_or_is_cut_short() {
        assert_eq!(check_elf(b"hello").unwrap_err(), "not an ELF file");
        let exe = own_executable();
        if exe[16] != ET_DYN as u8 {
            return; // not position-independent: nothing more to check with it
        }
        assert_eq!(check_elf(&exe), Ok(()));
        for cut in [20, 64, 1000, exe.len() / 2, exe.len() - 1] {
            let err = check_elf(&exe[..cut]).unwrap_err();
            assert!(err.contains("truncated"), "{cut}: {err}");
        }
        let mut other_machine = exe.clone();
        other_machine[18] ^= 0x40;
        assert!(check_elf(&other_machine).unwrap_err().contains("machine"));
    }

    #[test]
    fn refuses_special_files_and_missing_ones() {
        assert!(matches!(
            check_shared_object(Path::new("/dev/zero")),
            Err(PluginFault::NotRegularFile(_))
        ));
        assert!(matches!(
            check_shared_object(Path::new("/nonexistent/plugin.so")),
            Err(PluginFault::NoSuchFile)
        ));
    }
}
