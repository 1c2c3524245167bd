//! The virtual-CPU seam (feature `vcpu-hooks`) once a simulation is over: the library's
//! synchronisation points go back to their fast path, so a real-time measurement made in the
//! same process after a simulation (as `mballoc reproduce` makes them in the simulator build)
//! times the library as it was before any hook. One test in its own binary, so that no other
//! test installs a hook meanwhile and the process-wide count can be checked exactly.
#![cfg(all(feature = "vcpu-hooks", not(shuttle)))]

use std::cell::Cell;
use std::rc::Rc;

use mballoc::vcpu::{self, Access, Hook};
use mballoc::{Allocator, Flags, Geometry, Policy, Request};

/// Counts every synchronisation point it hears of.
#[derive(Default)]
struct Counter(Cell<u64>);

impl Counter {
    fn bump(&self) {
        self.0.set(self.0.get() + 1);
    }
}

impl Hook for Counter {
    fn lock(&self, _: usize, _: &'static str) {
        self.bump();
    }
    fn try_lock(&self, _: usize, _: &'static str) -> bool {
        self.bump();
        true
    }
    fn unlock(&self, _: usize, _: &'static str) {
        self.bump();
    }
    fn is_locked(&self, _: usize, _: &'static str) -> bool {
        self.bump();
        false
    }
    fn wait(&self, _: usize, _: usize, _: &'static str) {
        self.bump();
    }
    fn notify_all(&self, _: usize) {
        self.bump();
    }
    fn atomic(&self, _: usize, _: Access) {
        self.bump();
    }
}

fn allocator() -> Allocator {
    let geo = Geometry::new(4096, 2048, 16 * 2048, 0, 4).unwrap();
    Allocator::builder(geo)
        .cpus(1)
        .tunables(Policy::Linux618.tunables(&geo, 1))
        .build()
        .unwrap()
}

fn allocate(a: &Allocator, n: u64) {
    for i in 0..n {
        let r = Request::new(12 + i, 0, 8).with_flags(Flags::HINT_DATA | Flags::HINT_NOPREALLOC);
        a.allocate(&r).unwrap();
    }
}

#[test]
fn a_dropped_hook_leaves_no_synchronisation_point_hooked() {
    let a = allocator();
    assert_eq!(vcpu::live(), 0, "no hook before the first install");
    let counter = Rc::new(Counter::default());
    let installed = vcpu::install(Rc::clone(&counter) as Rc<dyn Hook>);
    assert_eq!(vcpu::live(), 1);
    allocate(&a, 20);
    let heard = counter.0.get();
    assert!(heard > 0, "an installed hook hears the allocations' locks");
    drop(installed);
    assert_eq!(vcpu::live(), 0, "the count falls back when the guard drops");
    allocate(&a, 20);
    assert_eq!(counter.0.get(), heard, "nothing reaches a dropped hook");
    // A swap changes what hears the points, not the count; a swap to none silences them.
    let other = Rc::new(Counter::default());
    let installed = vcpu::install(Rc::clone(&counter) as Rc<dyn Hook>);
    installed.swap(Some(Rc::clone(&other) as Rc<dyn Hook>));
    allocate(&a, 5);
    assert_eq!(counter.0.get(), heard, "the hook swapped out hears nothing");
    assert!(
        other.0.get() > 0,
        "the hook swapped in hears the allocations"
    );
    installed.swap(None);
    let quiet = other.0.get();
    allocate(&a, 5);
    assert_eq!(other.0.get(), quiet, "no hook after a swap to none");
    assert_eq!(vcpu::live(), 1, "swaps keep the count");
    drop(installed);
    assert_eq!(vcpu::live(), 0);
    // A hook on another thread is counted while it lives, and only while.
    std::thread::spawn(|| {
        let other = vcpu::install(Rc::new(Counter::default()) as Rc<dyn Hook>);
        assert_eq!(vcpu::live(), 1);
        drop(other);
    })
    .join()
    .unwrap();
    assert_eq!(vcpu::live(), 0);
}
