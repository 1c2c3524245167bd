//! Runs the virtual CPUs: each a stackful coroutine on the calling thread, resumed when the
//! scheduler ([`Sched`]) gives it the turn and suspended when it hands the turn on.
//!
//! Exactly one virtual CPU runs at a time, so nothing needs an OS thread of its own: a
//! scheduling step is a stack switch (tens of nanoseconds) instead of waking one OS thread
//! and putting another to sleep (a few microseconds each on a small machine, and most of the
//! host's time on the long runs: seed 003's commit cycles at 8-16 CPUs spent ~30 ms of host
//! time an operation, nearly all of it in futex waits). The allocator's code is the same: it
//! only reaches the scheduler through the hook the driver swaps in before each resume.

use std::any::Any;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::rc::Rc;
use std::sync::Arc;

use corosensei::stack::DefaultStack;
use corosensei::{CoroutineResult, ScopedCoroutine, ScopedCoroutineRef, Yielder};
use mballoc::vcpu::{self, Hook};

use super::sched::{Deadlock, Sched, VcpuHook};
use super::yielder::YIELDER;

/// Each virtual CPU's stack: an OS thread's default (mapped lazily, so untouched pages cost
/// nothing). The allocator's deepest paths use far less.
const STACK_BYTES: usize = 2 << 20;

type Co<'a, T> = ScopedCoroutine<'a, (), (), T, DefaultStack>;
type CoRef<'a, T> = ScopedCoroutineRef<'a, (), (), T, DefaultStack>;

/// Runs `bodies[me]` as virtual CPU `me` of `s`, every CPU's on this thread in the order the
/// scheduler decides, and returns their results. A virtual deadlock is an error; any other
/// panic of a body is raised again here, once every CPU's stack has been unwound.
pub fn run_cpus<T, F: FnOnce() -> T>(s: &Arc<Sched>, bodies: Vec<F>) -> Result<Vec<T>, Deadlock> {
    assert_eq!(bodies.len(), s.cpus(), "one body per virtual CPU");
    let cos: Vec<Co<'_, T>> = bodies
        .into_iter()
        .map(|body| {
            let stack = DefaultStack::new(STACK_BYTES).expect("a virtual CPU's stack");
            ScopedCoroutine::with_stack(stack, move |y: &Yielder<(), ()>, ()| {
                YIELDER.set(y);
                body()
            })
        })
        .collect();
    // The coroutines are dropped (those suspended unwound, with no hook installed) before a
    // panic goes on.
    match in_scope(cos, Vec::new(), |refs| drive(s, refs)) {
        Ok(out) => Ok(out),
        Err(p) if p.is::<Deadlock>() => Err(Deadlock),
        Err(p) => resume_unwind(p),
    }
}

/// Opens each coroutine's scope inside the last one's and calls `f` with all of them.
fn in_scope<'r, T, R>(
    mut cos: Vec<Co<'_, T>>,
    refs: Vec<CoRef<'r, T>>,
    f: impl FnOnce(&mut [CoRef<'_, T>]) -> R,
) -> R {
    match cos.pop() {
        None => {
            let mut refs = refs;
            refs.reverse();
            f(&mut refs)
        }
        Some(co) => co.scope(move |r| {
            let mut inner: Vec<CoRef<'_, T>> = refs;
            inner.push(r);
            in_scope(cos, inner, f)
        }),
    }
}

/// Resumes the CPU whose turn it is until every CPU is done.
fn drive<T>(s: &Arc<Sched>, cos: &mut [CoRef<'_, T>]) -> Result<Vec<T>, Box<dyn Any + Send>> {
    let hooks: Vec<Rc<dyn Hook>> = (0..cos.len())
        .map(|me| {
            Rc::new(VcpuHook {
                sched: Arc::clone(s),
                me,
            }) as Rc<dyn Hook>
        })
        .collect();
    let mut out: Vec<Option<T>> = cos.iter().map(|_| None).collect();
    // One guard for the whole run; each step swaps the running CPU's hook in and out, so the
    // scheduler's own work between steps is never reported.
    let Some(first) = hooks.first() else {
        return Ok(Vec::new());
    };
    let installed = vcpu::install(Rc::clone(first));
    installed.swap(None);
    while let Some(me) = s.turn() {
        installed.swap(Some(Rc::clone(&hooks[me])));
        let step = catch_unwind(AssertUnwindSafe(|| cos[me].as_mut().resume(())));
        installed.swap(None);
        YIELDER.set(std::ptr::null());
        match step? {
            CoroutineResult::Yield(()) => {}
            CoroutineResult::Return(v) => {
                out[me] = Some(v);
                catch_unwind(AssertUnwindSafe(|| s.finish(me)))?;
            }
        }
    }
    Ok(out
        .into_iter()
        .map(|o| o.expect("the scheduler ends only when every CPU is done"))
        .collect())
}
