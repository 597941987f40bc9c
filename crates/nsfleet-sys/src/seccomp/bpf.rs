//! A seccomp filter's rules compiled to classic BPF, the program the kernel runs on every
//! system call: the architecture checked first (another ABI is refused whole), then the
//! call's number, then the rules of that number, each a return of its action once its
//! conditions on the call's arguments hold. Encoding only: installing is the caller's.
//!
//! Every conditional jump skips at most a few instructions (the kernel's offsets are 8
//! bits); whatever goes further is an unconditional `ja`, whose offset is 32 bits.

use super::{ret, Action, ArgCmp, CmpOp, Rule};

// linux/filter.h, linux/bpf_common.h.
const LD_W_ABS: u16 = 0x20;
const ALU_AND_K: u16 = 0x54;
const JA: u16 = 0x05;
const JEQ_K: u16 = 0x15;
const JGT_K: u16 = 0x25;
const JGE_K: u16 = 0x35;
const RET_K: u16 = 0x06;

/// Offsets in `struct seccomp_data`: the call's number, its architecture, its arguments
/// (64 bits each, the low half first on the little-endian machines this is built for).
const NR: u32 = 0;
const ARCH_AT: u32 = 4;
const ARGS_AT: u32 = 16;

/// The kernel's limit on a filter's length (BPF_MAXINSNS).
pub const MAX_INSTRUCTIONS: usize = 4096;

/// An instruction whose far jump (`ja`) goes to a label, resolved once every label is
/// placed.
#[derive(Clone, Copy)]
enum Insn {
    Plain(libc::sock_filter),
    JumpTo(usize),
}

/// A program being written, with labels for its forward jumps.
#[derive(Default)]
struct Writer {
    insns: Vec<Insn>,
    /// Each label's instruction, once placed.
    labels: Vec<Option<usize>>,
}

impl Writer {
    fn op(&mut self, code: u16, k: u32, jt: u8, jf: u8) {
        self.insns
            .push(Insn::Plain(libc::sock_filter { code, jt, jf, k }));
    }

    fn label(&mut self) -> usize {
        self.labels.push(None);
        self.labels.len() - 1
    }

    fn place(&mut self, label: usize) {
        self.labels[label] = Some(self.insns.len());
    }

    fn ja(&mut self, label: usize) {
        self.insns.push(Insn::JumpTo(label));
    }

    fn ret(&mut self, action: Action) {
        self.op(RET_K, ret(action), 0, 0);
    }

    /// Goes to `fail` unless `code` with `k` is true of A.
    fn unless(&mut self, code: u16, k: u32, fail: usize) {
        self.op(code, k, 1, 0);
        self.ja(fail);
    }

    fn finish(self) -> Vec<libc::sock_filter> {
        let at = |l: usize| self.labels[l].expect("every label is placed");
        (self.insns.iter().enumerate())
            .map(|(i, insn)| match *insn {
                Insn::Plain(f) => f,
                Insn::JumpTo(l) => libc::sock_filter {
                    code: JA,
                    jt: 0,
                    jf: 0,
                    k: (at(l) - i - 1) as u32,
                },
            })
            .collect()
    }
}

/// The program: `arch` the only architecture let through (another, and x86_64's x32
/// calls, which carry `x32_bit`, get `other_abi`), each rule's action where its
/// number and conditions match (the first of a call's rules in `rules`' order that
/// matches: the caller orders them), `default` otherwise, but for calls numbered above
/// `newer`'s number, which get its action.
pub(super) fn compile(
    arch: u32,
    x32_bit: u32,
    other_abi: Action,
    default: Action,
    rules: &[Rule],
    newer: Option<(u32, Action)>,
) -> Vec<libc::sock_filter> {
    let mut w = Writer::default();
    let refuse_abi = w.label();
    w.op(LD_W_ABS, ARCH_AT, 0, 0);
    w.unless(JEQ_K, arch, refuse_abi);
    w.op(LD_W_ABS, NR, 0, 0);
    if x32_bit != 0 {
        w.op(JGE_K, x32_bit, 0, 1);
        w.ja(refuse_abi);
    }
    // The calls with one rule and no condition: a jump and a return each, on the
    // number loaded once. The others after, each its block.
    let (plain, conditioned): (Vec<&Rule>, Vec<&Rule>) = rules
        .iter()
        .partition(|r| r.args.is_empty() && rules.iter().filter(|o| o.nr == r.nr).count() == 1);
    for r in plain {
        w.op(JEQ_K, r.nr, 0, 1);
        w.ret(r.action);
    }
    let mut numbers: Vec<u32> = conditioned.iter().map(|r| r.nr).collect();
    numbers.sort_unstable();
    numbers.dedup();
    for nr in numbers {
        let next_call = w.label();
        w.op(LD_W_ABS, NR, 0, 0);
        w.unless(JEQ_K, nr, next_call);
        for r in conditioned.iter().filter(|r| r.nr == nr) {
            let next_rule = w.label();
            for cmp in &r.args {
                condition(&mut w, cmp, next_rule);
            }
            w.ret(r.action);
            w.place(next_rule);
        }
        w.ret(default);
        w.place(next_call);
    }
    if let Some((newest, action)) = newer {
        w.op(LD_W_ABS, NR, 0, 0);
        w.op(JGT_K, newest, 0, 1);
        w.ret(action);
    }
    w.ret(default);
    w.place(refuse_abi);
    w.ret(other_abi);
    w.finish()
}

/// Falls through where `cmp` holds of the call's argument, goes to `fail` where not: the
/// high halves compared first, the low ones where the high ones are equal.
fn condition(w: &mut Writer, cmp: &ArgCmp, fail: usize) {
    let at = ARGS_AT + 8 * cmp.index as u32;
    let (lo, hi) = (at, at + 4);
    let halves = |v: u64| ((v >> 32) as u32, v as u32);
    let (v_hi, v_lo) = halves(cmp.value);
    match cmp.op {
        CmpOp::Eq => {
            w.op(LD_W_ABS, hi, 0, 0);
            w.unless(JEQ_K, v_hi, fail);
            w.op(LD_W_ABS, lo, 0, 0);
            w.unless(JEQ_K, v_lo, fail);
        }
        CmpOp::MaskedEq => {
            let (w_hi, w_lo) = halves(cmp.value_two);
            w.op(LD_W_ABS, hi, 0, 0);
            w.op(ALU_AND_K, v_hi, 0, 0);
            w.unless(JEQ_K, w_hi, fail);
            w.op(LD_W_ABS, lo, 0, 0);
            w.op(ALU_AND_K, v_lo, 0, 0);
            w.unless(JEQ_K, w_lo, fail);
        }
        CmpOp::Ne => {
            // Holds where either half differs: a differing high half skips the rest.
            w.op(LD_W_ABS, hi, 0, 0);
            w.op(JEQ_K, v_hi, 0, 3);
            w.op(LD_W_ABS, lo, 0, 0);
            w.op(JEQ_K, v_lo, 0, 1);
            w.ja(fail);
        }
        CmpOp::Gt | CmpOp::Ge | CmpOp::Lt | CmpOp::Le => {
            // A high half beyond v_hi the asked way holds, the other way fails; equal
            // high halves ask the low ones. The kernel's jumps are >, >= and ==: a "<"
            // holds on a ">="'s false branch.
            let greater = matches!(cmp.op, CmpOp::Gt | CmpOp::Ge);
            let strict = matches!(cmp.op, CmpOp::Gt | CmpOp::Lt);
            let holds_after = |skip: u8| if greater { (skip, 0) } else { (0, skip) };
            w.op(LD_W_ABS, hi, 0, 0);
            let (jt, jf) = holds_after(4);
            w.op(if greater { JGT_K } else { JGE_K }, v_hi, jt, jf);
            w.op(JEQ_K, v_hi, 0, 2);
            w.op(LD_W_ABS, lo, 0, 0);
            let (jt, jf) = holds_after(1);
            w.op(if greater == strict { JGT_K } else { JGE_K }, v_lo, jt, jf);
            w.ja(fail);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs `program` as the kernel would on a call of number `nr` with `args`, under
    /// architecture `arch`: what it returns. The instructions compile emits only.
    fn run(program: &[libc::sock_filter], arch: u32, nr: u32, args: [u64; 6]) -> u32 {
        let mut data = vec![nr, arch, 0, 0];
        for a in args {
            data.extend([a as u32, (a >> 32) as u32]);
        }
        let (mut a, mut pc) = (0u32, 0usize);
        loop {
            let i = program[pc];
            pc += 1;
            match i.code {
                LD_W_ABS => a = data[i.k as usize / 4],
                ALU_AND_K => a &= i.k,
                JA => pc += i.k as usize,
                JEQ_K | JGT_K | JGE_K => {
                    let t = match i.code {
                        JEQ_K => a == i.k,
                        JGT_K => a > i.k,
                        _ => a >= i.k,
                    };
                    pc += if t { i.jt } else { i.jf } as usize;
                }
                RET_K => return i.k,
                c => panic!("instruction {c:#x}"),
            }
        }
    }

    const ARCH: u32 = 0xc000_003e;

    #[test]
    fn each_comparison_holds_as_for_64_bit_numbers() {
        let values = [
            0u64,
            1,
            7,
            0xffff_ffff,
            0x1_0000_0000,
            0x1_0000_0007,
            u64::MAX,
        ];
        type Holds = fn(u64, u64) -> bool;
        let ops: [(CmpOp, Holds); 6] = [
            (CmpOp::Eq, |a, v| a == v),
            (CmpOp::Ne, |a, v| a != v),
            (CmpOp::Gt, |a, v| a > v),
            (CmpOp::Ge, |a, v| a >= v),
            (CmpOp::Lt, |a, v| a < v),
            (CmpOp::Le, |a, v| a <= v),
        ];
        for (op, holds) in ops {
            for &v in &values {
                let rule = Rule {
                    nr: 5,
                    action: Action::Errno(9),
                    args: vec![ArgCmp {
                        index: 2,
                        op,
                        value: v,
                        value_two: 0,
                    }],
                };
                let p = compile(ARCH, 0, Action::KillProcess, Action::Allow, &[rule], None);
                for &a in &values {
                    let got = run(&p, ARCH, 5, [0, 0, a, 0, 0, 0]);
                    let want = if holds(a, v) {
                        Action::Errno(9)
                    } else {
                        Action::Allow
                    };
                    assert_eq!(got, ret(want), "{op:?} {a:#x} against {v:#x}");
                }
            }
        }
    }

    #[test]
    fn a_masked_comparison_a_call_of_several_rules_and_another_abi() {
        let masked = |want| ArgCmp {
            index: 0,
            op: CmpOp::MaskedEq,
            value: 0x7e02_0000,
            value_two: want,
        };
        let rules = [
            Rule {
                nr: 56,
                action: Action::Errno(1),
                args: vec![masked(0x0002_0000)],
            },
            Rule {
                nr: 56,
                action: Action::Allow,
                args: vec![masked(0)],
            },
            Rule {
                nr: 60,
                action: Action::Allow,
                args: vec![],
            },
        ];
        let p = compile(
            ARCH,
            0x4000_0000,
            Action::Errno(38),
            Action::KillThread,
            &rules,
            Some((60, Action::Errno(7))),
        );
        let call = |nr, a0| run(&p, ARCH, nr, [a0, 0, 0, 0, 0, 0]);
        assert_eq!(call(56, 0x0002_0011), ret(Action::Errno(1)));
        assert_eq!(call(56, 0x11), ret(Action::Allow));
        assert_eq!(call(56, 0x1000_0000), ret(Action::KillThread));
        assert_eq!(call(60, 0), ret(Action::Allow));
        assert_eq!(call(59, 0), ret(Action::KillThread));
        assert_eq!(call(61, 0), ret(Action::Errno(7)), "newer than every rule");
        assert_eq!(call(0x4000_0000 | 60, 0), ret(Action::Errno(38)));
        assert_eq!(run(&p, 0x4000_0003, 60, [0; 6]), ret(Action::Errno(38)));
    }
}
