-- KEYS: head, lease, fence, checkpoints, log, commits, new checkpoint.
-- ARGV: holder, token, version, cursor, items seen.
-- Make the checkpoint (the whole state of ``version``, written piece by piece beforehand) the
-- one to recover from, if this applier still holds the lease and it is newer than the current
-- one; then drop what it makes unnecessary: older checkpoints, the log up to its cursor, and
-- the commit records up to its version.
-- uses: int, stream_ids, keep_only, make_checkpoint
return make_checkpoint(KEYS, ARGV)
