-- A CDC trigger appends on its table owner's behalf (ADR 0045, 0047): the
-- owner needs the queue's "send" right, not only pgque_writer.  Another
-- application's table owner, whose table an admin gave a trigger on this
-- queue, is refused at every firing; the grantee's table produces.
create role cdcq_a login in role pgque_writer;
create role cdcq_b login in role pgque_writer;
select pgque.create_queue('cdcq');
select pgque.revoke_queue('cdcq', 'pgque_writer', 'send');
select pgque.grant_queue('cdcq', 'cdcq_a', 'send');
create schema cdcq;
grant usage on schema cdcq to public;
create table cdcq.b_t (id int primary key);
create table cdcq.a_t (id int primary key);
alter table cdcq.b_t owner to cdcq_b;
alter table cdcq.a_t owner to cdcq_a;
create trigger t after insert on cdcq.b_t for each row execute function pgque.logutriga('cdcq');
create trigger t after insert on cdcq.a_t for each row execute function pgque.logutriga('cdcq');
select pgque_test.error_of('insert into cdcq.b_t values (1)') as other_application_table;
select pgque_test.error_of('insert into cdcq.a_t values (1)') as grantee_table;
select ev_type, ev_data from pgque_test.events('cdcq');
-- a revoke takes effect at the next firing
select pgque.revoke_queue('cdcq', 'cdcq_a', 'send');
select pgque_test.error_of('insert into cdcq.a_t values (2)') as after_revoke;
drop schema cdcq cascade;
select pgque.drop_queue('cdcq', true);
drop role cdcq_a;
drop role cdcq_b;
