/* The return thunk this machine's kernel runs every function return through
 * (spec_rstack_overflow: "Safe RET": arch/x86/lib/retpoline.S, srso_return_thunk and
 * srso_safe_ret): linked into scripts/prefetch_walk_cost.c, built with
 * -mfunction-return=thunk-extern, so that its walks return as the kernel's do. */
	.text
	.globl __x86_return_thunk
	.type __x86_return_thunk,@function
__x86_return_thunk:
	call srso_safe_ret
	ud2
	.type srso_safe_ret,@function
srso_safe_ret:
	lea 8(%rsp), %rsp
	ret
	int3
	.section .note.GNU-stack,"",@progbits
