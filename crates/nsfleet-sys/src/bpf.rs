//! tcpdump's filter language compiled to classic BPF by libpcap's own compiler, loaded at
//! run time (`dlopen`): nsfleet neither links libpcap nor writes a compiler of its own, and
//! runs without libpcap until a filter is asked for.

use std::ffi::{c_char, c_int, c_uint, c_void, CStr, CString};

/// libpcap's names on Debian and elsewhere, most specific first.
const LIBRARIES: [&str; 3] = ["libpcap.so.0.8", "libpcap.so.1", "libpcap.so"];

/// DLT_EN10MB: every interface nsfleet captures on is Ethernet (veth, bridge, VXLAN).
pub const LINKTYPE_ETHERNET: c_int = 1;
const PCAP_NETMASK_UNKNOWN: c_uint = 0xffff_ffff;

#[repr(C)]
struct BpfProgram {
    len: c_uint,
    insns: *mut libc::sock_filter,
}

type OpenDead = unsafe extern "C" fn(c_int, c_int) -> *mut c_void;
type Compile =
    unsafe extern "C" fn(*mut c_void, *mut BpfProgram, *const c_char, c_int, c_uint) -> c_int;
type GetErr = unsafe extern "C" fn(*mut c_void) -> *const c_char;
type FreeCode = unsafe extern "C" fn(*mut BpfProgram);
type Close = unsafe extern "C" fn(*mut c_void);

/// `filter` (tcpdump's syntax, `tcp port 179 and host 10.0.0.1`) as a classic BPF program
/// for Ethernet frames, whose accepting instructions keep `snaplen` bytes; or what
/// libpcap says is wrong with it, or that libpcap is not installed.
pub fn compile_filter(filter: &str, snaplen: u32) -> Result<Vec<libc::sock_filter>, String> {
    let text =
        CString::new(filter).map_err(|_| "a filter cannot contain a NUL byte".to_string())?;
    let lib = open_libpcap()?;
    // SAFETY: each symbol is libpcap's documented function of this signature; a null
    // symbol was refused by `symbol`.
    unsafe {
        let open_dead: OpenDead = std::mem::transmute(symbol(lib, c"pcap_open_dead")?);
        let compile: Compile = std::mem::transmute(symbol(lib, c"pcap_compile")?);
        let geterr: GetErr = std::mem::transmute(symbol(lib, c"pcap_geterr")?);
        let freecode: FreeCode = std::mem::transmute(symbol(lib, c"pcap_freecode")?);
        let close: Close = std::mem::transmute(symbol(lib, c"pcap_close")?);
        let pcap = open_dead(LINKTYPE_ETHERNET, snaplen.min(i32::MAX as u32) as c_int);
        if pcap.is_null() {
            return Err("libpcap could not make a capture handle".into());
        }
        let mut prog = BpfProgram {
            len: 0,
            insns: std::ptr::null_mut(),
        };
        let rc = compile(pcap, &mut prog, text.as_ptr(), 1, PCAP_NETMASK_UNKNOWN);
        let result = if rc != 0 {
            Err(CStr::from_ptr(geterr(pcap)).to_string_lossy().into_owned())
        } else {
            let insns = std::slice::from_raw_parts(prog.insns, prog.len as usize).to_vec();
            freecode(&mut prog);
            Ok(insns)
        };
        close(pcap);
        result
    }
}

/// libpcap, loaded once and never unloaded.
fn open_libpcap() -> Result<*mut c_void, String> {
    for name in LIBRARIES {
        let c = CString::new(name).expect("no NUL in a library name");
        // SAFETY: dlopen with a valid C string; the handle is kept for the process's life.
        let h = unsafe { libc::dlopen(c.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
        if !h.is_null() {
            return Ok(h);
        }
    }
    Err(
        "a filter is compiled by libpcap, which is not installed (apt-get install libpcap0.8)"
            .into(),
    )
}

fn symbol(lib: *mut c_void, name: &CStr) -> Result<*mut c_void, String> {
    // SAFETY: `lib` is a live handle from dlopen and `name` a valid C string.
    let p = unsafe { libc::dlsym(lib, name.as_ptr()) };
    if p.is_null() {
        return Err(format!("libpcap has no {}", name.to_string_lossy()));
    }
    Ok(p)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_filter_compiles_and_a_bad_one_says_why() {
        let prog = compile_filter("icmp", 262144).unwrap();
        // ldh [12]; jeq #0x800; ldb [23]; jeq #1; ret #262144; ret #0
        assert_eq!(prog.len(), 6, "{prog:?}");
        assert_eq!(prog[4].k, 262144);
        let e = compile_filter("tcp port banana", 100).unwrap_err();
        assert!(e.contains("banana"), "{e}");
    }
}
