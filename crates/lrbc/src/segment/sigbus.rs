//! The SIGBUS guard, which lets a read survive a segment that shrinks under it.
//!
//! On Linux, touching a page of a shared mapping that lies wholly past the end of the
//! (now shorter) file raises SIGBUS. A process-wide handler looks the faulting address
//! up in a fixed table of our own mappings; if it belongs to one, it maps a private
//! zero page over the faulting page (`MAP_FIXED`) and returns, so the read completes
//! with zeros. The fault is counted; callers notice the shrink through `fstat` and the
//! zeros fail validation, so nothing built on them is trusted. Faults anywhere else go
//! to the handler that was installed before ours (the standard library's), or to the
//! default action.
//!
//! The handler only does async-signal-safe work: atomic loads and stores, `mmap`, and
//! `sigaction`.

use std::sync::Once;
use std::sync::atomic::{AtomicPtr, AtomicU64, AtomicUsize, Ordering};

const SLOT_COUNT: usize = 256;

struct Slot {
    /// Start address of the mapping; 0 when the slot is free.
    start: AtomicUsize,
    len: AtomicUsize,
    faults: AtomicU64,
}

#[expect(
    clippy::declare_interior_mutable_const,
    reason = "used only to initialise the static array"
)]
const EMPTY_SLOT: Slot = Slot {
    start: AtomicUsize::new(0),
    len: AtomicUsize::new(0),
    faults: AtomicU64::new(0),
};

static SLOTS: [Slot; SLOT_COUNT] = [EMPTY_SLOT; SLOT_COUNT];
static PAGE_BYTES: AtomicUsize = AtomicUsize::new(4096);
static PREVIOUS: AtomicPtr<libc::sigaction> = AtomicPtr::new(std::ptr::null_mut());
static INSTALL: Once = Once::new();

/// Keeps a mapping registered with the handler while it lives.
#[derive(Debug)]
pub struct SigbusGuard {
    slot: Option<usize>,
}

impl SigbusGuard {
    /// Pages patched with zeros in this mapping since it was registered.
    pub fn faults(&self) -> u64 {
        // Relaxed: a statistic; pairs with the handler's fetch_add, no data depends on it.
        self.slot
            .map_or(0, |i| SLOTS[i].faults.load(Ordering::Relaxed))
    }

    /// True when the mapping is protected (a slot was free).
    pub fn is_protected(&self) -> bool {
        self.slot.is_some()
    }
}

impl Drop for SigbusGuard {
    fn drop(&mut self) {
        if let Some(i) = self.slot {
            // Release: pairs with the handler's Acquire load of `start`; after this the
            // handler no longer treats the range as ours. The mapping is unmapped only
            // after the guard is dropped.
            SLOTS[i].start.store(0, Ordering::Release);
            SLOTS[i].len.store(0, Ordering::Relaxed);
        }
    }
}

/// Registers `[start, start + len)` so that a SIGBUS inside it is absorbed.
pub fn register(start: usize, len: usize) -> SigbusGuard {
    install();
    if start == 0 || len == 0 {
        return SigbusGuard { slot: None };
    }
    for (i, slot) in SLOTS.iter().enumerate() {
        // Claim a free slot. AcqRel on success: Acquire pairs with a previous owner's
        // Release store of 0 in `SigbusGuard::drop`, Release publishes the claim.
        if slot
            .start
            .compare_exchange(0, usize::MAX, Ordering::AcqRel, Ordering::Relaxed)
            .is_ok()
        {
            slot.len.store(len, Ordering::Relaxed);
            slot.faults.store(0, Ordering::Relaxed);
            // Release: pairs with the handler's Acquire load of `start`, which then
            // sees `len` as stored above.
            slot.start.store(start, Ordering::Release);
            return SigbusGuard { slot: Some(i) };
        }
    }
    SigbusGuard { slot: None }
}

fn install() {
    INSTALL.call_once(|| {
        // SAFETY: sysconf has no preconditions.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
        if page > 0 {
            PAGE_BYTES.store(page as usize, Ordering::Relaxed);
        }
        // SAFETY: zeroed sigaction structs are valid (empty mask, no flags).
        let mut action: libc::sigaction = unsafe { std::mem::zeroed() };
        action.sa_sigaction = on_sigbus as *const () as usize;
        action.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK | libc::SA_NODEFER;
        let previous = Box::into_raw(Box::new(
            // SAFETY: as above.
            unsafe { std::mem::zeroed::<libc::sigaction>() },
        ));
        // SAFETY: both pointers are valid sigaction structs; `previous` is leaked on
        // purpose so the handler can read it for the life of the process.
        let rc = unsafe { libc::sigaction(libc::SIGBUS, &action, previous) };
        if rc == 0 {
            // Release: pairs with the handler's Acquire load; the struct is complete.
            PREVIOUS.store(previous, Ordering::Release);
        }
    });
}

extern "C" fn on_sigbus(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    // SAFETY: the kernel passes a valid siginfo_t for SA_SIGINFO handlers.
    let addr = unsafe { (*info).si_addr() } as usize;
    let page = PAGE_BYTES.load(Ordering::Relaxed);
    for slot in &SLOTS {
        // Acquire: pairs with the Release store in `register`.
        let start = slot.start.load(Ordering::Acquire);
        let len = slot.len.load(Ordering::Relaxed);
        if start == 0 || start == usize::MAX || addr < start || addr - start >= len {
            continue;
        }
        let page_start = addr & !(page - 1);
        // SAFETY: the page lies inside a mapping this process created and still owns
        // (the guard is dropped before the unmap); replacing it with a private
        // anonymous page only changes what our own reads see.
        let mapped = unsafe {
            libc::mmap(
                page_start as *mut libc::c_void,
                page,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED,
                -1,
                0,
            )
        };
        if mapped != libc::MAP_FAILED {
            // Relaxed: a statistic read by `SigbusGuard::faults`.
            slot.faults.fetch_add(1, Ordering::Relaxed);
            return;
        }
        break;
    }
    chain(sig, info, ctx);
}

/// Hands a fault that is not ours to the previous handler, or restores the default
/// action so that the faulting instruction, re-run, terminates the process as usual.
fn chain(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    // Acquire: pairs with the Release store in `install`.
    let previous = PREVIOUS.load(Ordering::Acquire);
    // SAFETY: `previous` is either null or the leaked, fully written struct.
    let prev = unsafe { previous.as_ref() };
    match prev {
        Some(p) if p.sa_sigaction != libc::SIG_DFL && p.sa_sigaction != libc::SIG_IGN => {
            if p.sa_flags & libc::SA_SIGINFO != 0 {
                // SAFETY: with SA_SIGINFO the stored address is a three-argument handler.
                let f: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) =
                    unsafe { std::mem::transmute(p.sa_sigaction) };
                f(sig, info, ctx);
            } else {
                // SAFETY: without SA_SIGINFO the stored address is a one-argument handler.
                let f: extern "C" fn(libc::c_int) = unsafe { std::mem::transmute(p.sa_sigaction) };
                f(sig);
            }
        }
        _ => {
            // SAFETY: a zeroed sigaction is SIG_DFL with an empty mask.
            let mut dfl: libc::sigaction = unsafe { std::mem::zeroed() };
            dfl.sa_sigaction = libc::SIG_DFL;
            // SAFETY: valid pointer; sigaction is async-signal-safe.
            unsafe { libc::sigaction(sig, &dfl, std::ptr::null_mut()) };
        }
    }
}
