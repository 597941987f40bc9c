//! Locks that know their place in the lock order. Each [`Mutex`] and [`RwLock`] is made
//! with a [`Rank`] from [`order`], the one place where the order is written; in debug
//! builds (the tests), taking a lock out of order panics with both locks' names before
//! it blocks, as lockdep or `ASSERT_RTNL()` would say it, instead of deadlocking one day
//! under load. Release builds check nothing and pay nothing: the guard is parking_lot's
//! plus a zero-sized token.
//!
//! What is checked, per thread: a lock may be taken only while every lock the thread
//! holds has a lower level; nothing may be taken while a leaf is held; a lock of a kind
//! that is held several at once ([`Kind::Several`]) may be taken again at its own level,
//! and a shared lock taken recursively ([`RwLock::read_recursive`]) may be taken again.
//! A guard handed to another thread is not tracked there (parking_lot's guards are not
//! `Send`). This crate never blocks on anything but the lock asked for.

pub mod order;

use std::ops::{Deref, DerefMut};

/// How a lock sits in the order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Taken only while holding locks of lower levels.
    Ordered,
    /// As `Ordered`, and a thread may hold several of this name at once (one per node
    /// process, say), taken in an order of the caller's own.
    Several,
    /// Nothing is taken while it is held.
    Leaf,
}

/// A lock's place in the order: its level (lower is outer), its name, its kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rank {
    pub level: u8,
    pub name: &'static str,
    pub kind: Kind,
}

impl Rank {
    pub const fn ordered(level: u8, name: &'static str) -> Rank {
        Rank {
            level,
            name,
            kind: Kind::Ordered,
        }
    }

    pub const fn several(level: u8, name: &'static str) -> Rank {
        Rank {
            level,
            name,
            kind: Kind::Several,
        }
    }

    pub const fn leaf(name: &'static str) -> Rank {
        Rank {
            level: u8::MAX,
            name,
            kind: Kind::Leaf,
        }
    }
}

#[cfg(debug_assertions)]
mod check {
    use super::{Kind, Rank};
    use std::cell::RefCell;

    thread_local! {
        /// The ranks of the locks this thread holds, in the order it took them.
        static HELD: RefCell<Vec<Rank>> = const { RefCell::new(Vec::new()) };
    }

    /// Checks that this thread may take `want` now (`again`: a recursive shared lock,
    /// which may be held already), and records it as held.
    pub fn acquire(want: Rank, again: bool) -> Held {
        HELD.with(|held| {
            let mut held = held.borrow_mut();
            for h in held.iter() {
                let same = h.name == want.name && h.level == want.level;
                let allowed = if h.kind == Kind::Leaf {
                    false
                } else if same {
                    again || want.kind == Kind::Several
                } else {
                    h.level < want.level
                };
                if !allowed {
                    let order = held.iter().map(|r| r.name).collect::<Vec<_>>().join(" -> ");
                    panic!(
                        "lock order violated: taking `{}` (level {}) while holding `{}` (level {}{}); held: {order} (the order: nsfleet-locks/src/order.rs)",
                        want.name,
                        want.level,
                        h.name,
                        h.level,
                        if h.kind == Kind::Leaf { ", a leaf" } else { "" },
                    );
                }
            }
            held.push(want);
        });
        Held(want)
    }

    /// A lock held by this thread, forgotten when dropped (after the lock is released).
    pub struct Held(Rank);

    impl Drop for Held {
        fn drop(&mut self) {
            let _ = HELD.try_with(|held| {
                let mut held = held.borrow_mut();
                // Guards may be dropped in any order: the last one of this rank goes.
                if let Some(i) = held.iter().rposition(|r| *r == self.0) {
                    held.remove(i);
                }
            });
        }
    }
}

#[cfg(not(debug_assertions))]
mod check {
    use super::Rank;

    #[inline(always)]
    pub fn acquire(_: Rank, _: bool) -> Held {
        Held
    }

    pub struct Held;
}

/// A mutex of a rank: parking_lot's, checked in debug builds.
pub struct Mutex<T: ?Sized> {
    rank: Rank,
    inner: parking_lot::Mutex<T>,
}

impl<T> Mutex<T> {
    pub const fn new(rank: Rank, value: T) -> Mutex<T> {
        Mutex {
            rank,
            inner: parking_lot::const_mutex(value),
        }
    }

    pub fn into_inner(self) -> T {
        self.inner.into_inner()
    }
}

impl<T: ?Sized> Mutex<T> {
    pub fn lock(&self) -> MutexGuard<'_, T> {
        let held = check::acquire(self.rank, false);
        MutexGuard {
            guard: self.inner.lock(),
            _held: held,
        }
    }

    pub fn get_mut(&mut self) -> &mut T {
        self.inner.get_mut()
    }
}

impl<T: ?Sized + std::fmt::Debug> std::fmt::Debug for Mutex<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Mutex({}: {:?})", self.rank.name, &self.inner)
    }
}

/// The guard of a [`Mutex`]: the lock is released, then forgotten as held.
pub struct MutexGuard<'a, T: ?Sized> {
    guard: parking_lot::MutexGuard<'a, T>,
    _held: check::Held,
}

impl<T: ?Sized> Deref for MutexGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.guard
    }
}

impl<T: ?Sized> DerefMut for MutexGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        &mut self.guard
    }
}

/// A reader-writer lock of a rank: parking_lot's, checked in debug builds.
pub struct RwLock<T: ?Sized> {
    rank: Rank,
    inner: parking_lot::RwLock<T>,
}

impl<T> RwLock<T> {
    pub const fn new(rank: Rank, value: T) -> RwLock<T> {
        RwLock {
            rank,
            inner: parking_lot::const_rwlock(value),
        }
    }
}

impl<T: ?Sized> RwLock<T> {
    pub fn read(&self) -> RwLockReadGuard<'_, T> {
        let held = check::acquire(self.rank, false);
        RwLockReadGuard {
            guard: self.inner.read(),
            _held: held,
        }
    }

    /// Shared, even by a thread that holds it shared already and while a writer waits
    /// (parking_lot's `read_recursive`).
    pub fn read_recursive(&self) -> RwLockReadGuard<'_, T> {
        let held = check::acquire(self.rank, true);
        RwLockReadGuard {
            guard: self.inner.read_recursive(),
            _held: held,
        }
    }

    pub fn write(&self) -> RwLockWriteGuard<'_, T> {
        let held = check::acquire(self.rank, false);
        RwLockWriteGuard {
            guard: self.inner.write(),
            _held: held,
        }
    }
}

pub struct RwLockReadGuard<'a, T: ?Sized> {
    guard: parking_lot::RwLockReadGuard<'a, T>,
    _held: check::Held,
}

impl<T: ?Sized> Deref for RwLockReadGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.guard
    }
}

pub struct RwLockWriteGuard<'a, T: ?Sized> {
    guard: parking_lot::RwLockWriteGuard<'a, T>,
    _held: check::Held,
}

impl<T: ?Sized> Deref for RwLockWriteGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.guard
    }
}

impl<T: ?Sized> DerefMut for RwLockWriteGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        &mut self.guard
    }
}

#[cfg(all(test, debug_assertions))]
mod tests {
    use super::*;

    const OUTER: Rank = Rank::ordered(1, "outer");
    const INNER: Rank = Rank::ordered(2, "inner");
    const MANY: Rank = Rank::several(3, "many");
    const LEAF: Rank = Rank::leaf("leaf");

    #[test]
    fn locks_taken_in_order_pass_and_are_forgotten_when_released() {
        let (outer, inner, leaf) = (
            Mutex::new(OUTER, 0),
            Mutex::new(INNER, 0),
            Mutex::new(LEAF, 0),
        );
        let (a, b) = (Mutex::new(MANY, 0), Mutex::new(MANY, 0));
        {
            let _o = outer.lock();
            let _i = inner.lock();
            let (_a, _b) = (a.lock(), b.lock());
            let _l = leaf.lock();
        }
        // Released: the inner one may be taken first now, and the outer one after it is
        // released again.
        drop(inner.lock());
        drop(outer.lock());
        let shared = RwLock::new(OUTER, ());
        let _r = shared.read();
        let _again = shared.read_recursive();
    }

    #[test]
    #[should_panic(
        expected = "lock order violated: taking `outer` (level 1) while holding `inner` (level 2)"
    )]
    fn an_outer_lock_taken_under_an_inner_one_panics() {
        let (outer, inner) = (Mutex::new(OUTER, ()), Mutex::new(INNER, ()));
        let _i = inner.lock();
        let _o = outer.lock();
    }

    #[test]
    #[should_panic(expected = "while holding `leaf` (level 255, a leaf)")]
    fn nothing_is_taken_under_a_leaf() {
        let (inner, leaf) = (Mutex::new(INNER, ()), Mutex::new(LEAF, ()));
        let _l = leaf.lock();
        let _i = inner.lock();
    }

    #[test]
    #[should_panic(expected = "taking `inner` (level 2) while holding `inner`")]
    fn an_ordered_lock_is_not_taken_twice() {
        let (a, b) = (Mutex::new(INNER, ()), Mutex::new(INNER, ()));
        let _a = a.lock();
        let _b = b.lock();
    }
}
