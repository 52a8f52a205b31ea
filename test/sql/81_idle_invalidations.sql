-- The idle passes, round two (ADR 0103): a maintenance pass with nothing
-- to stamp sends no relcache invalidation of pgque.queue.  Rotation step 2
-- ran two UPDATEs in every pass; an UPDATE of no row still fires
-- pgque.queue's statement trigger (_queue_changed), whose invalidation
-- made every producer drop its cached queue rows and the ticker read its
-- queue list again every maint_interval.  Counted in calls of the trigger
-- function (track_functions), which do not depend on the machine's load.
select pgque.create_queue('t81_a'), pgque.create_queue('t81_b');
-- whatever an earlier file left to stamp, stamped first
select pgque.maint_rotate_tables_step2() >= 0 as settled;

-- 1. nothing to stamp: no UPDATE, no trigger call
begin;
set local track_functions = 'all';
select pgque.maint_rotate_tables_step2() as stamped;
select coalesce((select calls from pg_catalog.pg_stat_xact_user_functions
                  where schemaname = 'pgque' and funcname = '_queue_changed'), 0) as queue_changed_calls;
rollback;

-- 2. a switch made by an earlier transaction: stamped, one trigger call
update pgque.queue set queue_switch_step1 = '3'::xid8, queue_switch_step2 = null where queue_name = 't81_a';
begin;
set local track_functions = 'all';
select pgque.maint_rotate_tables_step2() as stamped;
select coalesce((select calls from pg_catalog.pg_stat_xact_user_functions
                  where schemaname = 'pgque' and funcname = '_queue_changed'), 0) as queue_changed_calls;
select queue_name, queue_switch_step2 = pg_catalog.pg_current_xact_id() as stamped_by_me
  from pgque.queue where queue_name like 't81\_%' order by 1;
commit;

-- 3. a change of partition buckets made by an earlier transaction: the
-- same stamp for it, the switch's left as it is
update pgque.queue set queue_buckets_step1 = '3'::xid8, queue_buckets_step2 = null where queue_name = 't81_b';
select pgque.maint_rotate_tables_step2() as stamped;
select queue_name, queue_buckets_step2 is not null as buckets_stamped, queue_switch_step2 is not null as switch_stamped
  from pgque.queue where queue_name like 't81\_%' order by 1;
-- and then nothing again
select pgque.maint_rotate_tables_step2() as stamped;

select pgque.drop_queue('t81_a'), pgque.drop_queue('t81_b');

-- 4. what the ticker's probe covered (shared memory, ADR 0103): no
-- queue of a database whose ticker published nothing, none with a
-- negative id or after the probe; no pgque role may ask it
select pgque._ticker_covered(1, pg_catalog.now() - interval '1 hour') as no_probe,
       pgque._ticker_covered(-1, '-infinity') as negative_id,
       pgque._ticker_covered(1, 'infinity') as after_any_probe,
       pgque._ticker_covered(null, pg_catalog.now()) as null_id;
select r, pg_catalog.has_function_privilege(r, 'pgque._ticker_covered(int4, timestamptz)', 'execute') as can_execute
  from pg_catalog.unnest(array['public', 'pgque_reader', 'pgque_writer', 'pgque_admin']) r order by 1;
