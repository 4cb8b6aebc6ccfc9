//! The named mappings ("Section" objects) of this session's object namespace, read
//! with the native API's object-directory calls, as WinObj lists them.

use windows_sys::Win32::Foundation::HANDLE;

use super::close;

/// What `NtQueryDirectoryObject` returns for each entry (the array ends with an entry
/// whose name is null; the strings follow the array in the same buffer).
#[repr(C)]
struct DirectoryEntry {
    name: windows_sys::Win32::Foundation::UNICODE_STRING,
    type_name: windows_sys::Win32::Foundation::UNICODE_STRING,
}

/// A string of a directory entry, if it lies within the `filled` bytes at `buf`.
fn entry_string(
    s: &windows_sys::Win32::Foundation::UNICODE_STRING,
    buf: *const u8,
    filled: usize,
) -> Option<String> {
    let start = (s.Buffer as usize).checked_sub(buf as usize)?;
    let len = usize::from(s.Length);
    if s.Buffer.is_null() || start.checked_add(len)? > filled || !len.is_multiple_of(2) {
        return None;
    }
    // SAFETY: `start..start + len` lies within the `filled` bytes the call wrote into the
    // buffer (checked above), which is u16-aligned (a u64 buffer, even offsets).
    let units = unsafe { std::slice::from_raw_parts(s.Buffer.cast_const(), len / 2) };
    Some(String::from_utf16_lossy(units))
}

/// The names of the named mappings ("Section" objects) in this session's namespace
/// (`\Sessions\<id>\BaseNamedObjects`, or `\BaseNamedObjects` in session 0), as WinObj
/// lists them; None where the object directory cannot be read.
pub fn named_sections() -> Option<Vec<String>> {
    use windows_sys::Wdk::Foundation::OBJECT_ATTRIBUTES;
    use windows_sys::Wdk::Storage::FileSystem::{NtOpenDirectoryObject, NtQueryDirectoryObject};
    use windows_sys::Win32::Foundation::UNICODE_STRING;
    use windows_sys::Win32::System::RemoteDesktop::ProcessIdToSessionId;

    const DIRECTORY_QUERY: u32 = 0x0001;
    const OBJ_CASE_INSENSITIVE: u32 = 0x40;

    let mut session = 0u32;
    // SAFETY: `session` is a valid, writable u32.
    if unsafe { ProcessIdToSessionId(std::process::id(), &mut session) } == 0 {
        return None;
    }
    let path = if session == 0 {
        "\\BaseNamedObjects".to_string()
    } else {
        format!("\\Sessions\\{session}\\BaseNamedObjects")
    };
    let mut units: Vec<u16> = path.encode_utf16().collect();
    let bytes = u16::try_from(units.len() * 2).ok()?;
    let name = UNICODE_STRING {
        Length: bytes,
        MaximumLength: bytes,
        Buffer: units.as_mut_ptr(),
    };
    let attributes = OBJECT_ATTRIBUTES {
        Length: size_of::<OBJECT_ATTRIBUTES>() as u32,
        RootDirectory: std::ptr::null_mut(),
        ObjectName: &name,
        Attributes: OBJ_CASE_INSENSITIVE,
        SecurityDescriptor: std::ptr::null(),
        SecurityQualityOfService: std::ptr::null(),
    };
    let mut dir: HANDLE = std::ptr::null_mut();
    // SAFETY: `attributes` and the string it points to outlive the call; `dir` is
    // writable; a failure status is checked.
    if unsafe { NtOpenDirectoryObject(&mut dir, DIRECTORY_QUERY, &attributes) } < 0 {
        return None;
    }
    // One entry per call: Wine implements only that, and it is as correct everywhere.
    let mut buf = vec![0u64; 1024];
    let buf_bytes = buf.len() * 8;
    let (mut out, mut context, mut restart) = (Vec::new(), 0u32, true);
    loop {
        let mut filled = 0u32;
        // SAFETY: `dir` was opened with DIRECTORY_QUERY; the buffer is writable and its
        // size is passed; `context` and `filled` are writable.
        let status = unsafe {
            NtQueryDirectoryObject(
                dir,
                buf.as_mut_ptr().cast(),
                buf_bytes as u32,
                true,
                restart,
                &mut context,
                &mut filled,
            )
        };
        restart = false;
        if status < 0 || filled == 0 {
            break;
        }
        let base = buf.as_ptr().cast::<u8>();
        let filled = (filled as usize).min(buf_bytes);
        let entries = base.cast::<DirectoryEntry>();
        for i in 0..filled / size_of::<DirectoryEntry>() {
            // SAFETY: entry `i` lies within the filled part of the buffer (bounded by the
            // loop), which is aligned for DirectoryEntry (a u64 buffer).
            let e = unsafe { &*entries.add(i) };
            if e.name.Buffer.is_null() {
                break;
            }
            if entry_string(&e.type_name, base, filled).as_deref() == Some("Section")
                && let Some(n) = entry_string(&e.name, base, filled)
            {
                out.push(n);
            }
        }
    }
    close(dir);
    Some(out)
}
#[cfg(test)]
mod tests {
    use windows_sys::Win32::Foundation::INVALID_HANDLE_VALUE;
    use windows_sys::Win32::System::Memory::{CreateFileMappingW, PAGE_READWRITE};

    #[test]
    fn a_named_mapping_of_this_session_is_listed() {
        let name = format!("lrbc-unit-section-{}", std::process::id());
        let w: Vec<u16> = name.encode_utf16().chain(std::iter::once(0)).collect();
        // SAFETY: a 4 KiB mapping on the paging file under a NUL-terminated name that
        // outlives the call; a null result is checked.
        let h = unsafe {
            CreateFileMappingW(
                INVALID_HANDLE_VALUE,
                std::ptr::null(),
                PAGE_READWRITE,
                0,
                4096,
                w.as_ptr(),
            )
        };
        assert!(!h.is_null());
        let sections = super::named_sections().expect("the session's objects are listed");
        super::close(h);
        assert!(sections.contains(&name), "{sections:?}");
    }
}
