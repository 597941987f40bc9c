//! nf_tables requests (NETLINK_NETFILTER): tables, base chains and rules built from the
//! few expressions nsfleet's published ports need (meta, payload, fib, cmp, immediate,
//! nat, masquerade).
//!
//! Only the wire layout lives here. nf_tables applies a batch as one transaction: the
//! requests go between [`batch_begin`] and [`batch_end`], and the kernel commits all of
//! them or none. The begin and the end ask for no ACK (kernels before 6.10 never send
//! one, and none comes for an aborted batch's end); every request between them does, and
//! a failure of the whole (nf_tables missing, a failed commit) comes back on the begin's
//! sequence number: [`NlSocket::execute_transaction`](crate::NlSocket::execute_transaction)
//! waits for exactly that. What the rules say is the caller's business.

use crate::msg::{Batch, NLM_F_CREATE, NLM_F_EXCL};
use std::net::IpAddr;

/// The netlink protocol to open a socket with for these requests.
pub const NETLINK_NETFILTER: i32 = libc::NETLINK_NETFILTER;

const NLM_F_APPEND: u16 = 0x800;
const NFNL_SUBSYS_NFTABLES: u16 = 10;
const NFNL_MSG_BATCH_BEGIN: u16 = 16;
const NFNL_MSG_BATCH_END: u16 = 17;
const NFT_MSG_NEWTABLE: u16 = 0;
const NFT_MSG_DELTABLE: u16 = 2;
const NFT_MSG_NEWCHAIN: u16 = 3;
const NFT_MSG_DELCHAIN: u16 = 5;
const NFT_MSG_NEWRULE: u16 = 6;
const NFT_MSG_DELRULE: u16 = 8;
const NFT_MSG_GETGEN: u16 = 16;

const NFTA_TABLE_NAME: u16 = 1;
const NFTA_TABLE_FLAGS: u16 = 2;
/// The table belongs to the socket that made it: only that socket may change it, and the
/// kernel removes it when the socket closes, however its process ended.
const NFT_TABLE_F_OWNER: u32 = 2;
const NFTA_CHAIN_TABLE: u16 = 1;
const NFTA_CHAIN_NAME: u16 = 3;
const NFTA_CHAIN_HOOK: u16 = 4;
const NFTA_CHAIN_TYPE: u16 = 7;
const NFTA_HOOK_HOOKNUM: u16 = 1;
const NFTA_HOOK_PRIORITY: u16 = 2;
const NFTA_RULE_TABLE: u16 = 1;
const NFTA_RULE_CHAIN: u16 = 2;
const NFTA_RULE_EXPRESSIONS: u16 = 4;
const NFTA_LIST_ELEM: u16 = 1;
const NFTA_EXPR_NAME: u16 = 1;
const NFTA_EXPR_DATA: u16 = 2;
const NFTA_DATA_VALUE: u16 = 1;
const NFTA_META_DREG: u16 = 1;
const NFTA_META_KEY: u16 = 2;
const NFTA_PAYLOAD_DREG: u16 = 1;
const NFTA_PAYLOAD_BASE: u16 = 2;
const NFTA_PAYLOAD_OFFSET: u16 = 3;
const NFTA_PAYLOAD_LEN: u16 = 4;
const NFTA_FIB_DREG: u16 = 1;
const NFTA_FIB_RESULT: u16 = 2;
const NFTA_FIB_FLAGS: u16 = 3;
const NFT_FIB_RESULT_ADDRTYPE: u32 = 3;
const NFTA_FIB_F_DADDR: u32 = 1 << 1;
const NFTA_CMP_SREG: u16 = 1;
const NFTA_CMP_OP: u16 = 2;
const NFTA_CMP_DATA: u16 = 3;
const NFT_CMP_EQ: u32 = 0;
const NFT_CMP_NEQ: u32 = 1;
const NFTA_IMMEDIATE_DREG: u16 = 1;
const NFTA_IMMEDIATE_DATA: u16 = 2;
const NFTA_NAT_TYPE: u16 = 1;
const NFTA_NAT_FAMILY: u16 = 2;
const NFTA_NAT_REG_ADDR_MIN: u16 = 3;
const NFTA_NAT_REG_PROTO_MIN: u16 = 5;
const NFT_NAT_DNAT: u32 = 1;

/// Address families of nf_tables (NFPROTO_*).
pub const NFPROTO_INET: u8 = 1;
pub const NFPROTO_IPV4: u8 = 2;
pub const NFPROTO_IPV6: u8 = 10;

/// The hooks a base chain attaches to (NF_INET_*).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Hook {
    Prerouting = 0,
    Output = 3,
    Postrouting = 4,
}

/// The registers expressions load into and read from (each 16 bytes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reg {
    R1 = 1,
    R2 = 2,
}

/// What a `meta` expression loads (NFT_META_*).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MetaKey {
    /// The output interface's name, IFNAMSIZ bytes.
    OifName = 7,
    /// The packet's family (NFPROTO_*), one byte.
    NfProto = 15,
    /// The transport protocol (IPPROTO_*), one byte.
    L4Proto = 16,
}

/// Where a `payload` expression reads (NFT_PAYLOAD_*_HEADER).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Base {
    Network = 1,
    Transport = 2,
}

/// One expression of a rule.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Expr {
    Meta(MetaKey, Reg),
    Payload {
        base: Base,
        offset: u32,
        len: u32,
        to: Reg,
    },
    /// The route type of the packet's destination address (RTN_*, a u32 in host order).
    FibDaddrType(Reg),
    /// The rule stops here unless the register equals `value`.
    CmpEq(Reg, Vec<u8>),
    /// The rule stops here if the register equals `value`.
    CmpNeq(Reg, Vec<u8>),
    Immediate(Reg, Vec<u8>),
    /// Destination NAT to the address in `addr` and the port (network order) in `port`.
    Dnat {
        family: u8,
        addr: Reg,
        port: Reg,
    },
    Masquerade,
}

/// The route type of an address of this host (RTN_LOCAL).
pub const RTN_LOCAL: u32 = 2;

/// Starts a transaction; the requests that follow, up to [`batch_end`], commit together.
/// Its `seq` is the one a failure of the whole transaction comes back on.
pub fn batch_begin(b: &mut Batch, seq: u32) {
    b.begin_unacked(NFNL_MSG_BATCH_BEGIN, 0, seq)
        .header(&nfgenmsg(0, NFNL_SUBSYS_NFTABLES))
        .end();
}

/// Ends a transaction begun by [`batch_begin`].
pub fn batch_end(b: &mut Batch, seq: u32) {
    b.begin_unacked(NFNL_MSG_BATCH_END, 0, seq)
        .header(&nfgenmsg(0, NFNL_SUBSYS_NFTABLES))
        .end();
}

/// Asks for the ruleset's generation: a request outside any transaction that every
/// kernel with nf_tables answers, and any other refuses (a probe).
pub fn get_gen(b: &mut Batch, seq: u32) {
    message(b, NFT_MSG_GETGEN, 0, seq, 0).end();
}

/// A table of the socket sending it (see [`NFT_TABLE_F_OWNER`]); refused if it exists.
pub fn new_owned_table(b: &mut Batch, seq: u32, family: u8, name: &str) {
    message(b, NFT_MSG_NEWTABLE, NLM_F_CREATE | NLM_F_EXCL, seq, family)
        .attr_str(NFTA_TABLE_NAME, name)
        .attr(NFTA_TABLE_FLAGS, &NFT_TABLE_F_OWNER.to_be_bytes())
        .end();
}

/// Removes a table with its chains and rules.
pub fn del_table(b: &mut Batch, seq: u32, family: u8, name: &str) {
    message(b, NFT_MSG_DELTABLE, 0, seq, family)
        .attr_str(NFTA_TABLE_NAME, name)
        .end();
}

/// A base chain of type `nat` on `hook`, run at `priority` among the hook's chains.
pub fn new_nat_chain(
    b: &mut Batch,
    seq: u32,
    family: u8,
    table: &str,
    name: &str,
    hook: Hook,
    priority: i32,
) {
    message(b, NFT_MSG_NEWCHAIN, NLM_F_CREATE | NLM_F_EXCL, seq, family)
        .attr_str(NFTA_CHAIN_TABLE, table)
        .attr_str(NFTA_CHAIN_NAME, name);
    let h = b.nest_begin(NFTA_CHAIN_HOOK);
    b.attr(NFTA_HOOK_HOOKNUM, &(hook as u32).to_be_bytes())
        .attr(NFTA_HOOK_PRIORITY, &priority.to_be_bytes());
    b.nest_end(h).attr_str(NFTA_CHAIN_TYPE, "nat").end();
}

/// Removes a chain and every rule in it.
pub fn del_chain(b: &mut Batch, seqs: [u32; 2], family: u8, table: &str, name: &str) {
    // The kernel refuses to remove a chain that still has rules: a rule request without
    // a handle removes them all first.
    message(b, NFT_MSG_DELRULE, 0, seqs[0], family)
        .attr_str(NFTA_RULE_TABLE, table)
        .attr_str(NFTA_RULE_CHAIN, name)
        .end();
    message(b, NFT_MSG_DELCHAIN, 0, seqs[1], family)
        .attr_str(NFTA_CHAIN_TABLE, table)
        .attr_str(NFTA_CHAIN_NAME, name)
        .end();
}

/// Appends a rule of `exprs` to a chain (without NLM_F_APPEND it would go first).
pub fn new_rule(b: &mut Batch, seq: u32, family: u8, table: &str, chain: &str, exprs: &[Expr]) {
    message(b, NFT_MSG_NEWRULE, NLM_F_CREATE | NLM_F_APPEND, seq, family)
        .attr_str(NFTA_RULE_TABLE, table)
        .attr_str(NFTA_RULE_CHAIN, chain);
    let list = b.nest_begin(NFTA_RULE_EXPRESSIONS);
    for e in exprs {
        let elem = b.nest_begin(NFTA_LIST_ELEM);
        expr(b, e);
        b.nest_end(elem);
    }
    b.nest_end(list).end();
}

/// The bytes a register compares against for an address: its octets.
pub fn addr_bytes(a: IpAddr) -> Vec<u8> {
    match a {
        IpAddr::V4(a) => a.octets().to_vec(),
        IpAddr::V6(a) => a.octets().to_vec(),
    }
}

/// An interface name as `meta oifname` loads it: IFNAMSIZ bytes, NUL-padded.
pub fn ifname_bytes(name: &str) -> Vec<u8> {
    let mut v = name.as_bytes().to_vec();
    v.resize(libc::IFNAMSIZ, 0);
    v
}

fn expr(b: &mut Batch, e: &Expr) {
    let be32 = |b: &mut Batch, ty: u16, v: u32| {
        b.attr(ty, &v.to_be_bytes());
    };
    let name = match e {
        Expr::Meta(..) => "meta",
        Expr::Payload { .. } => "payload",
        Expr::FibDaddrType(_) => "fib",
        Expr::CmpEq(..) | Expr::CmpNeq(..) => "cmp",
        Expr::Immediate(..) => "immediate",
        Expr::Dnat { .. } => "nat",
        Expr::Masquerade => "masq",
    };
    b.attr_str(NFTA_EXPR_NAME, name);
    let d = b.nest_begin(NFTA_EXPR_DATA);
    match e {
        Expr::Meta(key, to) => {
            be32(b, NFTA_META_DREG, *to as u32);
            be32(b, NFTA_META_KEY, *key as u32);
        }
        Expr::Payload {
            base,
            offset,
            len,
            to,
        } => {
            be32(b, NFTA_PAYLOAD_DREG, *to as u32);
            be32(b, NFTA_PAYLOAD_BASE, *base as u32);
            be32(b, NFTA_PAYLOAD_OFFSET, *offset);
            be32(b, NFTA_PAYLOAD_LEN, *len);
        }
        Expr::FibDaddrType(to) => {
            be32(b, NFTA_FIB_DREG, *to as u32);
            be32(b, NFTA_FIB_RESULT, NFT_FIB_RESULT_ADDRTYPE);
            be32(b, NFTA_FIB_FLAGS, NFTA_FIB_F_DADDR);
        }
        Expr::CmpEq(from, value) | Expr::CmpNeq(from, value) => {
            let op = match e {
                Expr::CmpEq(..) => NFT_CMP_EQ,
                _ => NFT_CMP_NEQ,
            };
            be32(b, NFTA_CMP_SREG, *from as u32);
            be32(b, NFTA_CMP_OP, op);
            data(b, NFTA_CMP_DATA, value);
        }
        Expr::Immediate(to, value) => {
            be32(b, NFTA_IMMEDIATE_DREG, *to as u32);
            data(b, NFTA_IMMEDIATE_DATA, value);
        }
        Expr::Dnat { family, addr, port } => {
            be32(b, NFTA_NAT_TYPE, NFT_NAT_DNAT);
            be32(b, NFTA_NAT_FAMILY, *family as u32);
            be32(b, NFTA_NAT_REG_ADDR_MIN, *addr as u32);
            be32(b, NFTA_NAT_REG_PROTO_MIN, *port as u32);
        }
        Expr::Masquerade => {}
    }
    b.nest_end(d);
}

/// `value` as a nested NFTA_DATA_VALUE under attribute `ty`.
fn data(b: &mut Batch, ty: u16, value: &[u8]) {
    let n = b.nest_begin(ty);
    b.attr(NFTA_DATA_VALUE, value);
    b.nest_end(n);
}

fn message(b: &mut Batch, ty: u16, flags: u16, seq: u32, family: u8) -> &mut Batch {
    b.begin((NFNL_SUBSYS_NFTABLES << 8) | ty, flags, seq)
        .header(&nfgenmsg(family, 0))
}

/// struct nfgenmsg: family, version (NFNETLINK_V0), resource id (big-endian).
fn nfgenmsg(family: u8, res_id: u16) -> [u8; 4] {
    let r = res_id.to_be_bytes();
    [family, 0, r[0], r[1]]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::msg::{attrs, messages};

    #[test]
    fn a_rule_nests_each_expression_with_its_name_and_data() {
        let mut b = Batch::new();
        new_rule(
            &mut b,
            1,
            NFPROTO_INET,
            "t",
            "c",
            &[
                Expr::Meta(MetaKey::L4Proto, Reg::R1),
                Expr::CmpEq(Reg::R1, vec![6]),
            ],
        );
        let m = messages(b.bytes()).next().unwrap();
        assert_eq!(m.ty, (10 << 8) | 6);
        assert_eq!(&m.payload[..4], &[NFPROTO_INET, 0, 0, 0]);
        let a: Vec<_> = attrs(&m.payload[4..]).collect();
        assert_eq!(a[0], (NFTA_RULE_TABLE, &b"t\0"[..]));
        let exprs: Vec<_> = attrs(a[2].1).collect();
        assert_eq!(exprs.len(), 2);
        let cmp: Vec<_> = attrs(exprs[1].1).collect();
        assert_eq!(cmp[0], (NFTA_EXPR_NAME, &b"cmp\0"[..]));
        let data: Vec<_> = attrs(cmp[1].1).collect();
        let value: Vec<_> = attrs(data[2].1).collect();
        assert_eq!(value, vec![(NFTA_DATA_VALUE, &[6u8][..])]);
    }

    #[test]
    fn batch_markers_name_the_nftables_subsystem() {
        let mut b = Batch::new();
        batch_begin(&mut b, 1);
        let m = messages(b.bytes()).next().unwrap();
        assert_eq!(m.ty, NFNL_MSG_BATCH_BEGIN);
        assert_eq!(&m.payload[..4], &[0, 0, 0, 10]);
    }
}
