/* A small shim over libext2fs for the churn benchmark: an ext4-shaped filesystem that lives
 * only in memory (ext2fs_initialize never writes until a flush, and we never flush), block
 * allocation with ext2fs_new_range(MIN_LENGTH) + ext2fs_block_alloc_stats_range, and a walk
 * of the free runs of the block bitmap at the end. */
#include <string.h>
#include <ext2fs/ext2fs.h>

/* Opens `path` (an existing file; never written) as a fresh fs of `blocks` 4 KiB blocks with
 * `per_group` blocks per group. Returns 0 or an errcode_t. */
long mb_e2_open(const char *path, unsigned long long blocks, unsigned int per_group, int rbtree,
                void **out)
{
    struct ext2_super_block param;
    ext2_filsys fs = NULL;
    errcode_t err;

    memset(&param, 0, sizeof(param));
    ext2fs_blocks_count_set(&param, blocks);
    param.s_log_block_size = 2; /* 1024 << 2 = 4 KiB */
    param.s_blocks_per_group = per_group;
    param.s_feature_incompat |= EXT4_FEATURE_INCOMPAT_64BIT;
    err = ext2fs_initialize(path, EXT2_FLAG_64BITS, &param, unix_io_manager, &fs);
    if (err)
        return (long)err;
    if (rbtree) {
        /* Re-create the block bitmap with the red-black-tree back-end. */
        ext2fs_block_bitmap bm = NULL;
        fs->default_bitmap_type = EXT2FS_BMAP64_RBTREE;
        err = ext2fs_allocate_block_bitmap(fs, "rb", &bm);
        if (err) {
            ext2fs_free(fs);
            return (long)err;
        }
        err = ext2fs_copy_bitmap(fs->block_map, &bm);
        if (err) {
            ext2fs_free(fs);
            return (long)err;
        }
        ext2fs_free_block_bitmap(fs->block_map);
        fs->block_map = bm;
    }
    *out = fs;
    return 0;
}

/* One run of exactly `len` blocks from `goal` (wrapping once), marked in use. */
long mb_e2_alloc(void *h, unsigned long long goal, unsigned int len, unsigned long long *start)
{
    ext2_filsys fs = h;
    blk64_t pblk = 0, plen = 0;
    errcode_t err = ext2fs_new_range(fs, EXT2_NEWRANGE_MIN_LENGTH, goal, len, NULL, &pblk, &plen);
    if (err)
        return (long)err;
    ext2fs_block_alloc_stats_range(fs, pblk, len, +1);
    *start = pblk;
    return 0;
}

void mb_e2_free(void *h, unsigned long long start, unsigned int len)
{
    ext2fs_block_alloc_stats_range((ext2_filsys)h, start, len, -1);
}

/* The free run at or after `from`: returns 0 and sets start/len, or 1 if none is left. */
int mb_e2_next_free(void *h, unsigned long long from, unsigned long long *start,
                    unsigned long long *len)
{
    ext2_filsys fs = h;
    blk64_t end = ext2fs_blocks_count(fs->super) - 1, s = 0, e = 0;
    if (from > end)
        return 1;
    if (ext2fs_find_first_zero_block_bitmap2(fs->block_map, from, end, &s))
        return 1;
    if (s == end || ext2fs_find_first_set_block_bitmap2(fs->block_map, s + 1, end, &e))
        e = end + 1;
    *start = s;
    *len = e - s;
    return 0;
}

unsigned long long mb_e2_first_data_block(void *h)
{
    return ((ext2_filsys)h)->super->s_first_data_block;
}

void mb_e2_close(void *h)
{
    ext2fs_free((ext2_filsys)h);
}
