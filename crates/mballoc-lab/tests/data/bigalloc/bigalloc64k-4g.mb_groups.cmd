# mkfs.ext4 -q -F -O bigalloc -C 65536 -U <fixed> -E lazy_itable_init=0,lazy_journal_init=0,nodiscard,hash_seed=<fixed> (E2FSPROGS_FAKE_TIME=1700000000, e2fsprogs 1.47.0) on a 4 GiB sparse file
# cat /proc/fs/ext4/<dev>/mb_groups after mount -o ro
# kernel 6.18.44-fc-v595
