# frag4k.raw.gz with byte 401508 xor 0x0f (bad-bitmap), mount -o ro, then
# cat /proc/fs/ext4/loop1/mb_groups (first read after the mount)
# kernel 6.18.44-fc-v595
