# cat /proc/fs/ext4/loop1/mb_groups after mount -o ro of frag4k.img
# kernel 6.18.44-fc-v595
