-- The grantee anchor (ADR 0079): a role named in a queue's rights or a
-- consumer's users holds SELECT on the empty pgque.grantee_anchor, so DROP
-- ROLE refuses it; revoking (or unsubscribing, dropping the queue) releases
-- it; after DROP OWNED the OID left in the lists grants nothing and
-- maintenance takes it out; a listed role without its own anchor grant (the
-- role that holds a dropped role's OID in a restored cluster) is refused.
create role t47_app login in role pgque_reader, pgque_writer;
create role t47_user login in role pgque_reader;
create role t47_sender login in role pgque_writer;
create role "T47 Odd" login in role pgque_reader;
create role t47_nobody login;
grant usage on schema pgque_test to public;

select pgque.create_queue('anchored');
select pgque.revoke_queue('anchored', 'pgque_writer', 'send');
set role t47_app;
select pgque.subscribe('anchored', 'private');
select pgque.grant_consumer('anchored', 'private', 't47_user') as granted_user;
select pgque.grant_consumer('anchored', 'private', '"T47 Odd"') as granted_odd_name;
reset role;
select pgque.grant_queue('anchored', 't47_sender', 'send') as granted_send;
select pgque.grant_queue('anchored', 't47_user', 'send') as granted_user_send;

-- each granted role holds its own anchor grant, and so does the consumer's
-- owner t47_app (ADR 0071); nobody else a new one
select r.rolname, pgque._role_anchored(r.oid::regrole) as anchored
  from pg_roles r where r.rolname like 't47%' or r.rolname = 'T47 Odd' order by 1;

-- DROP ROLE refuses them, naming the anchor
\set VERBOSITY default
drop role t47_user;
drop role t47_sender;
drop role "T47 Odd";
\set VERBOSITY terse

-- revoking one of two grants keeps the anchor; revoking the last frees it
select pgque.revoke_queue('anchored', 't47_user', 'send') as revoked_send;
select pgque._role_anchored('t47_user') as still_anchored_by_consumer;
set role t47_app;
select pgque.revoke_consumer('anchored', 'private', 't47_user') as revoked_user;
reset role;
select pgque._role_anchored('t47_user') as user_anchored_after_revokes;
drop role t47_user;
select pgque.revoke_queue('anchored', 't47_sender', 'send') as revoked_sender;
drop role t47_sender;

-- the extension's roles keep theirs: a new queue's default senders send
select pgque._role_anchored('pgque_writer') as writer_kept;
select pgque.create_queue('anchored_2');
set role t47_app;
select pgque.send('anchored_2', 'ok') > 0 as default_sender_sends;
reset role;

-- DROP OWNED takes the anchor; the OID left behind grants nothing and
-- maintenance removes it from the lists
create role t47_ghost login in role pgque_reader, pgque_writer;
set role t47_app;
select pgque.grant_consumer('anchored', 'private', 't47_ghost') as granted_ghost;
reset role;
select pgque.grant_queue('anchored', 't47_ghost', 'send') as granted_ghost_send;
select pgque.grant_queue('anchored_2', 't47_ghost', 'subscribe') as granted_ghost_subscribe;
select oid as ghost from pg_roles where rolname = 't47_ghost' \gset
drop owned by t47_ghost;
drop role t47_ghost;
select (select count(*) from pgque.consumer_rights where :ghost::oid = any (users::oid[])) as users_stale,
       (select count(*) from pgque.queue where :ghost::oid = any (queue_senders::oid[] || queue_subscribers::oid[]))
           as queues_stale;
select step from pgque._maint_steps() where call = 'pgque._maint_stale_roles()';
select pgque._maint_stale_roles() as cleaned;
select (select count(*) from pgque.consumer_rights where :ghost::oid = any (users::oid[])) as users_stale,
       (select count(*) from pgque.queue where :ghost::oid = any (queue_senders::oid[] || queue_subscribers::oid[]))
           as queues_stale;
select pgque._maint_stale_roles() as nothing_left;

-- a listed role without its own anchor grant (what a restore hands the
-- role that takes a dropped role's OID) may neither send nor receive
set role t47_app;
select pgque.grant_consumer('anchored', 'private', 't47_nobody') as granted_nobody;
reset role;
select pgque.grant_queue('anchored', 't47_nobody', 'send') as nobody_send,
       pgque.grant_queue('anchored', 't47_nobody', 'subscribe') as nobody_subscribe;
grant usage on schema pgque to t47_nobody;
grant execute on function pgque.send(text, text), pgque.receive(text, text, int4) to t47_nobody;
set role t47_nobody;
select pgque.send('anchored', 'anchored send') > 0 as anchored_sends;
select pgque_test.error_of($$select * from pgque.receive('anchored', 'private', 10)$$) as anchored_receives;
reset role;
revoke select on pgque.grantee_anchor from t47_nobody;    -- as the restore would have it
set role t47_nobody;
select pgque_test.error_of($$select pgque.send('anchored', 'forged')$$) as unanchored_send;
select pgque_test.error_of($$select * from pgque.receive('anchored', 'private', 10)$$) as unanchored_receive;
reset role;
-- the same for a consumer's users, through a group role: its member
-- receives while the group is anchored, not after
create role t47_group;
create role t47_member login in role t47_group, pgque_reader;
set role t47_app;
select pgque.grant_consumer('anchored', 'private', 't47_group') as granted_group;
reset role;
set role t47_member;
select pgque_test.error_of($$select * from pgque.receive('anchored', 'private', 10)$$) as group_receives;
reset role;
revoke select on pgque.grantee_anchor from t47_group;
set role t47_member;
select pgque_test.error_of($$select * from pgque.receive('anchored', 'private', 10)$$) as unanchored_group;
reset role;

-- unsubscribe and drop_queue release what they discard
set role t47_app;
select pgque.grant_consumer('anchored', 'private', '"T47 Odd"') as held_already;
select pgque.unsubscribe('anchored', 'private');
reset role;
select pgque._role_anchored('"T47 Odd"') as odd_after_unsubscribe;
drop role "T47 Odd";
create role t47_q login;
select pgque.grant_queue('anchored_2', 't47_q', 'subscribe') as granted_q;
select pgque.drop_queue('anchored_2', true);
select pgque._role_anchored('t47_q') as q_after_drop_queue;
drop role t47_q;

-- no pgque role may touch the anchor's helpers, and what SELECT on the
-- anchor gives is an empty, column-less table
set role t47_app;
select pgque_test.error_of($$select pgque._anchor('t47_app')$$) as app_anchor;
select pgque_test.error_of($$select pgque._anchor_release(array['pgque_writer'::regrole])$$) as app_release;
select pgque_test.error_of($$select pgque._maint_stale_roles()$$) as app_clean;
select pgque_test.error_of($$grant select on pgque.grantee_anchor to t47_nobody$$) as app_regrant;
reset role;
select pgque._role_anchored('t47_nobody') as nobody_still_unanchored;
set role pgque_reader;
select count(*) as anchor_rows from pgque.grantee_anchor;
reset role;

-- a partitioned consumer: its users are anchored as well, maintenance
-- cleans the consumer's list and its slots' copies, and the last
-- unsubscribe_slot releases
create role t47_p login in role pgque_reader;
create role t47_pghost;
set role t47_app;
select pgque.subscribe_slot('anchored', 'shards', 0, 2), pgque.subscribe_slot('anchored', 'shards', 1, 2);
select pgque.grant_consumer('anchored', 'shards', 't47_p') as granted_p,
       pgque.grant_consumer('anchored', 'shards', 't47_pghost') as granted_pghost;
reset role;
\set VERBOSITY terse
drop role t47_p;
\set VERBOSITY default
drop owned by t47_pghost;
drop role t47_pghost;
select pgque._maint_stale_roles() as cleaned_partitioned;
select users::text as shards_users from pgque.consumer_rights where consumer_name = 'shards';
set role t47_app;
select pgque.unsubscribe_slot('anchored', 'shards', 0);
reset role;
select pgque._role_anchored('t47_p') as p_after_first_slot;
set role t47_app;
select pgque.unsubscribe_slot('anchored', 'shards', 1);
reset role;
select pgque._role_anchored('t47_p') as p_after_last_slot;
drop role t47_p;

select pgque.drop_queue('anchored', true);
revoke usage on schema pgque_test from public;
drop owned by t47_nobody;
drop role t47_app, t47_nobody, t47_member, t47_group;
