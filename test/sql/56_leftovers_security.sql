-- Security leftovers, round two (ADR 0071).
--
-- 1. touch_subconsumer authorizes before it looks the member up: a role
--    that may not use a cooperative group got 0 for a name that is not a
--    member and 42501 for one that is, so it could list the members.
create role t56_private login;
grant pgque_reader to t56_private;
create role t56_other login;
grant pgque_reader to t56_other;
select pgque.create_queue('t56_q');
set role t56_private;
-- a role that is no admin subscribes a private group (ADR 0058)
select pgque.subscribe_subconsumer('t56_q', 't56_group', 'member_a') as registered;
reset role;
set role t56_other;
-- the same answer, 42501, for a member and for a name that is none
select pgque_test.error_of($$select pgque.touch_subconsumer('t56_q', 't56_group', 'member_a')$$) as member;
select pgque_test.error_of($$select pgque.touch_subconsumer('t56_q', 't56_group', 'nobody')$$) as not_member;
select pgque_test.error_of($$select pgque.next_batch('t56_q', 't56_group', 'member_a')$$) as next_member;
select pgque_test.error_of($$select pgque.next_batch('t56_q', 't56_group', 'nobody')$$) as next_not_member;
select pgque_test.error_of($$select pgque.unregister_subconsumer('t56_q', 't56_group', 'nobody')$$) as unregister_not_member;
-- a group that does not exist is not a secret (get_consumer_info lists the groups): 0
select pgque.touch_subconsumer('t56_q', 't56_nogroup', 'member_a') as no_group;
reset role;
-- the owner: 1 for its member, 0 for a name that is none
set role t56_private;
select pgque.touch_subconsumer('t56_q', 't56_group', 'member_a') as touched,
       pgque.touch_subconsumer('t56_q', 't56_group', 'nobody') as not_touched;
reset role;

-- 2. A consumer's owner is anchored like a listed role (ADR 0071, 0079):
--    DROP ROLE refuses it, and an owner OID a restore wrote as a bare
--    number onto another role grants that role nothing.
create role t56_alice login;
grant pgque_reader to t56_alice;
create role t56_mallory login;
grant pgque_reader to t56_mallory;
set role t56_alice;
select pgque.subscribe('t56_q', 'c_alice') as subscribed;
select count(*) as slot_subscribed from (select pgque.subscribe_slot('t56_q', 'p_alice', 0, 1)) s;
reset role;
select pgque._role_anchored('t56_alice') as alice_anchored,
       pgque._role_anchored('t56_mallory') as mallory_anchored;
-- DROP ROLE refuses the owner (2BP01), as for a granted role
select pgque_test.error_of('drop role t56_alice') ~ '^2BP01: role "t56_alice" cannot be dropped' as drop_refused;
-- a restore onto a cluster where the owner's OID is mallory's: the
-- consumers name her by OID, yet she holds no anchor
update pgque.subscription set sub_owner = 't56_mallory'
 where sub_consumer in (select co_id from pgque.consumer where co_name in ('c_alice', 'p_alice#0/1'));
update pgque.partition_consumer set owner = 't56_mallory' where co_name = 'p_alice';
set role t56_mallory;
select pgque_test.error_of($$select pgque.receive('t56_q', 'c_alice', 10)$$) ~ '^42501' as receive_refused;
select pgque_test.error_of($$select pgque.unsubscribe('t56_q', 'c_alice')$$) ~ '^42501' as unsubscribe_refused;
select pgque_test.error_of($$select pgque.claim_slot('t56_q', 'p_alice', 0, 'm')$$) ~ '^42501' as claim_refused;
-- subscribing another slot of it does not anchor her either
select pgque_test.error_of($$select pgque.subscribe_slot('t56_q', 'p_alice', 0, 1)$$) ~ '^42501' as subscribe_slot_refused;
reset role;
select pgque._role_anchored('t56_mallory') as mallory_still_unanchored;
-- back to alice; DROP OWNED takes her anchor, DROP ROLE then succeeds and
-- maintenance gives her consumers to pgque_admin: no bare OID is left
update pgque.subscription set sub_owner = 't56_alice'
 where sub_consumer in (select co_id from pgque.consumer where co_name in ('c_alice', 'p_alice#0/1'));
update pgque.partition_consumer set owner = 't56_alice' where co_name = 'p_alice';
drop owned by t56_alice;
drop role t56_alice;
select pgque._maint_stale_roles() as owners_given_back;
select c.co_name, s.sub_owner from pgque.subscription s join pgque.consumer c on c.co_id = s.sub_consumer
 where c.co_name in ('c_alice', 'p_alice#0/1') order by 1;
select co_name, owner from pgque.partition_consumer where co_name = 'p_alice';
select pgque._maint_stale_roles() as nothing_left;
-- unsubscribing the last consumer of a role releases its anchor
set role t56_mallory;
select pgque.subscribe('t56_q', 'c_mallory') as subscribed;
reset role;
select pgque._role_anchored('t56_mallory') as anchored_while_owner;
set role t56_mallory;
select pgque.unsubscribe('t56_q', 'c_mallory') as unsubscribed;
reset role;
select pgque._role_anchored('t56_mallory') as released_after_unsubscribe;
select pgque.unsubscribe('t56_q', 'c_alice'), pgque.unsubscribe_slot('t56_q', 'p_alice', 0);

-- 3. A new name may not carry control characters (22023): a newline in a
--    name the workers quote forged lines of the server log.  A name 0.2.0
--    stored keeps working (the lookups do not check it; the workers'
--    log escapes it).
select pgque_test.error_of($$select pgque.create_queue(E't56\nLOG:  forged')$$) as new_queue;
select pgque_test.error_of($$select pgque.subscribe('t56_q', E'c\rx')$$) as new_consumer;
select pgque_test.error_of($$select pgque.subscribe_slot('t56_q', E'p\tx', 0, 1)$$) as new_partitioned;
select pgque_test.error_of($$select pgque.register_subconsumer('t56_q', 't56_group2', E'm\u0085x')$$) as new_member;
select count(*) as p_w from (select pgque.subscribe_slot('t56_q', 'p_w', 0, 1)) s;
select pgque_test.error_of($$select pgque.claim_slot('t56_q', 'p_w', 0, E'w\nx')$$) as worker;
select count(*) as p_w_gone from (select pgque.unsubscribe_slot('t56_q', 'p_w', 0)) s;
-- a tab or a DEL counts too; printable Unicode does not
select pgque_test.error_of($$select pgque.create_queue(E't56\x7f')$$) as del;
select pgque.create_queue('t56_é✓') as printable_unicode, pgque.drop_queue('t56_é✓') as dropped;
-- a queue and a consumer stored with a newline by 0.2.0 (written here
-- directly) are still served
update pgque.queue set queue_name = E't56_old\nq' where queue_name = 't56_q';
insert into pgque.consumer (co_name) values (E'old\nc');
select pgque.subscribe(E't56_old\nq', E'old\nc') as old_names_subscribe;
select pgque.send(E't56_old\nq', 'kept') > 0 as sent;
select pgque.ticker(E't56_old\nq') is not null as ticked;
select payload from pgque.receive(E't56_old\nq', E'old\nc', 10);
select pgque.unsubscribe(E't56_old\nq', E'old\nc') as unsubscribed;
update pgque.queue set queue_name = 't56_q' where queue_name = E't56_old\nq';
