//! The running virtual CPU's way back to the driver (`super::coro`): the yielder of the
//! coroutine on this thread, and [`suspend`], which the scheduler calls when a CPU must wait
//! for its turn. Kept apart from the driver, which drives the scheduler, so that the
//! scheduler can suspend a CPU without depending on the driver.

use std::cell::Cell;

use corosensei::Yielder;

thread_local! {
    /// The yielder of the coroutine running on this thread; null outside one.
    pub(super) static YIELDER: Cell<*const Yielder<(), ()>> = const { Cell::new(std::ptr::null()) };
}

/// Suspends the running virtual CPU until the driver resumes it (its turn came).
pub(super) fn suspend() {
    let y = YIELDER.get();
    assert!(!y.is_null(), "a virtual CPU waits outside its coroutine");
    // SAFETY: `y` is the `&Yielder` the running coroutine's body received (set when it
    // started and again after each resume, cleared by the driver whenever a coroutine
    // stops running). That body is still on the stack we are running on, so the yielder it
    // borrows is alive.
    unsafe { &*y }.suspend(());
    YIELDER.set(y);
}
