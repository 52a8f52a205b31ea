-- The second reader's attacks on 0.3.0's new surfaces (issue #30's hot
-- paths), each one that worked, with the fix that closed it (the report of
-- the attack branch lists those that failed).

-- The direct append (ADR 0085) into an event table an owner made a
-- partition of a table of its own: the executor's INSERT checks a row
-- inserted into a partition directly against the partition's bounds, which
-- are no CHECK constraint; the direct append skipped the check, and rows
-- outside the bounds went in (a read through the parent prunes them away).
-- Such a table takes the kept plan, with every rule of an INSERT.
select pgque.create_queue('atk_part') > 0 as created;
select queue_id as atk_qid from pgque.queue where queue_name = 'atk_part' \gset
\set atk_tab 'pgque.event_' :atk_qid '_0'
-- a verdict made before (the plain table: appended directly), then the attach
select pgque.send('atk_part', 'in-1') as id_1;
alter table :atk_tab no inherit pgque.event_:atk_qid;
create table pgque_test.atk_parent (like pgque.event_template) partition by range (ev_id);
alter table pgque_test.atk_parent attach partition :atk_tab for values from (1) to (4);
-- ids 1 to 3 are inside the bounds, 4 and on are not (the queue's sequence is its own)
select pgque.send('atk_part', 'in-2') as id_2;
select pgque.send_batch('atk_part', 't', array['in-3']) as id_3;
select regexp_replace(pgque_test.error_of($$select pgque.send('atk_part', 'out-4')$$),
                      'event_[0-9]+_', 'event_N_') as send_outside;
select regexp_replace(pgque_test.error_of($$select pgque.send_batch('atk_part', 't', array['out-5', 'out-6'])$$),
                      'event_[0-9]+_', 'event_N_') as batch_outside;
select regexp_replace(pgque_test.error_of($$select pgque.insert_event('atk_part', 't', 'out-7', null, null, null, null)$$),
                      'event_[0-9]+_', 'event_N_') as insert_event_outside;
-- what the table holds, and what the parent shows: the same three rows
select ev_id, ev_data from :atk_tab order by ev_id;
select count(*) as through_parent from pgque_test.atk_parent;
-- detached and inherited again: the queue appends as before (ids go on)
alter table pgque_test.atk_parent detach partition :atk_tab;
drop table pgque_test.atk_parent;
alter table :atk_tab inherit pgque.event_:atk_qid;
select pgque.send('atk_part', 'after') > 3 as sent_after;
select count(*) as events from pgque.event_:atk_qid;
select pgque.drop_queue('atk_part', true);
