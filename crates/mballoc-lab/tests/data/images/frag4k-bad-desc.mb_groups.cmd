# frag4k.raw.gz with byte 4412 xor 0x0f (bad-desc), mount -o ro, then
# cat /proc/fs/ext4/loop1/mb_groups (first read after the mount)
# kernel 6.18.44-fc-v595
