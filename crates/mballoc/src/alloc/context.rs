//! One allocation in flight (`struct ext4_allocation_context`).

use crate::error::Error;
use crate::group::size_class::{SizeClass, Stage};
use crate::request::{Criterion, Flags, GroupExtent, Request};
use crate::stats::LocalStats;
use crate::tunables::Tunables;

/// A free extent inside one group (`struct ext4_free_extent`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Ex {
    pub group: u32,
    pub start: u32,
    pub len: u32,
    pub logical: u32,
}

impl Ex {
    pub fn as_group_extent(&self) -> GroupExtent {
        GroupExtent {
            group: self.group,
            start: i64::from(self.start),
            len: self.len,
            logical: self.logical,
        }
    }
}

/// `ac_status`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    Continue,
    Found,
    Break,
}

pub struct Ctx<'a> {
    pub req: &'a Request,
    pub tun: &'a Tunables,
    /// This thread's counters, pinned for the request.
    pub stats: LocalStats<'a>,
    /// The original request (`ac_o_ex`).
    pub o_ex: Ex,
    /// The goal: normalised request (`ac_g_ex`); `start == -1` after a stream-goal swap.
    pub g_ex: GroupExtent,
    /// Best extent found so far (`ac_b_ex`), then the part handed out.
    pub b_ex: Ex,
    /// What was taken from the buddy (`ac_f_ex`).
    pub f_ex: Ex,
    pub orig_goal_len: u32,
    pub flags: Flags,
    pub cr: Criterion,
    /// The criteria loop ran past CR_ANY_FREE (`ac_criteria == EXT4_MB_NUM_CRS`).
    pub cr_done: bool,
    pub status: Status,
    pub found: u32,
    pub cx_found: [u32; 5],
    pub groups_scanned: u32,
    pub two_order: u32,
    pub tail: u32,
    pub buddy: u32,
    pub prefetch_grp: u32,
    pub prefetch_nr: u32,
    pub prefetch_ios: u32,
    /// The prefetch steps can do nothing in this request ([`Allocator`](crate::alloc::allocator::Allocator)'s
    /// `prefetch_idle`): the walks skip them.
    pub prefetch_idle: bool,
    pub first_err: Option<Error>,
    /// The request's size class; `None` when size classes are off or this is not data.
    pub class: SizeClass,
    /// The class filter of the current stage; `None` = every group (stage `Any`).
    pub stage: Option<Stage>,
    /// The requesting CPU, whose class groups come first (`size_class_per_cpu`).
    pub home: u32,
    /// The request's own goal (group, start) before a stream-goal swap: where a class stage
    /// looks first in that group (`size_class_largest_first`, btrfs's hint).
    pub hint: Option<(u32, u32)>,
    /// The request starts a new run of its file (`size_class_stream_groups`): empty groups
    /// come before its class's groups.
    pub new_run: bool,
}

impl<'a> Ctx<'a> {
    pub fn new(
        req: &'a Request,
        tun: &'a Tunables,
        stats: LocalStats<'a>,
        o_ex: Ex,
        len: u32,
    ) -> Self {
        let o_ex = Ex { len, ..o_ex };
        Ctx {
            req,
            tun,
            stats,
            o_ex,
            g_ex: o_ex.as_group_extent(),
            b_ex: Ex::default(),
            f_ex: Ex::default(),
            orig_goal_len: len,
            flags: req.flags,
            cr: Criterion::Power2Aligned,
            cr_done: false,
            status: Status::Continue,
            found: 0,
            cx_found: [0; 5],
            groups_scanned: 0,
            two_order: 0,
            tail: 0,
            buddy: 0,
            prefetch_grp: 0,
            prefetch_nr: 0,
            prefetch_ios: 0,
            prefetch_idle: false,
            first_err: None,
            class: SizeClass::None,
            stage: None,
            home: 0,
            hint: None,
            new_run: false,
        }
    }

    /// The goal's start inside its group (a stream goal's −1 reads as 0).
    pub fn goal_start(&self) -> u32 {
        self.g_ex.start.max(0) as u32
    }
}
