-- Who may attach a CDC trigger with expressions (issue #25 item 9, ADR 0045).
-- when= and ev_*= run as the table's owner; TRIGGER on a table is not the
-- right to run SQL as its owner.  A pgque_admin holding TRIGGER and INSERT on
-- another role's table used to attach jsontriga('q', 'ev_extra4=(select ...
-- from app.secret)') and read the owner's private table in the event.  Only a
-- role with the owner's rights may attach expressions now, however the
-- trigger is created.
select pgque.create_queue('q35');

create role app35 login in role pgque_writer, pgque_admin;
create role app35_dev login in role app35, pgque_admin;
create role mallory35 login in role pgque_admin;
create schema app35 authorization app35;
create schema mallory35 authorization mallory35;
grant usage on schema pgque_test to app35, mallory35, app35_dev;
set role app35;
create table app35.t (id int primary key);
create table app35.secret (s text);
insert into app35.secret values ('the owner''s secret');
grant usage on schema app35 to mallory35;
grant trigger, insert on app35.t to mallory35;
reset role;

-- the attack as written, and with when=: refused at CREATE TRIGGER
set role mallory35;
select pgque_test.error_of($$
    create trigger steal after insert on app35.t for each row execute function
        pgque.jsontriga('q35', 'ev_extra4=(select string_agg(s, '','') from app35.secret)')$$) as attack;
select pgque_test.error_of($$
    create trigger steal after insert on app35.t for each row execute function
        pgque.logutriga('q35', 'when=(select count(*) > 0 from app35.secret)')$$) as attack_when;
select pgque_test.error_of($$
    create trigger steal before insert on app35.t for each row execute function
        pgque.sqltriga('q35', 'SKIP', 'ev_type=current_user')$$) as attack_sqltriga;
-- without expressions TRIGGER is enough (the row is the table's, as in any trigger)
create trigger plain after insert on app35.t for each row execute function pgque.jsontriga('q35');
-- ... but not to turn it into one with expressions, nor to replace the owner's
select pgque_test.error_of($$
    create or replace trigger plain after insert on app35.t for each row execute function
        pgque.jsontriga('q35', 'ev_extra4=(select string_agg(s, '','') from app35.secret)')$$) as replace_own;
reset role;
set role app35;
create trigger owners after insert on app35.t for each row execute function
    pgque.jsontriga('q35', 'ev_extra4=current_user');
reset role;
set role mallory35;
select pgque_test.error_of($$
    create or replace trigger owners after insert on app35.t for each row execute function
        pgque.jsontriga('q35', 'ev_extra4=(select string_agg(s, '','') from app35.secret)')$$) as replace_owners;
-- through a function of its own (SECURITY DEFINER runs as mallory35 too)
create function mallory35.attach() returns void language plpgsql security definer as $$
begin
    execute $q$create trigger steal after insert on app35.t for each row execute function
        pgque.jsontriga('q35', 'ev_extra4=(select string_agg(s, '','') from app35.secret)')$q$;
end $$;
select pgque_test.error_of('select mallory35.attach()') as through_definer;
-- giving its own table with such a trigger to the owner: PostgreSQL's check
create table mallory35.m (id int primary key);
create trigger steal after insert on mallory35.m for each row execute function
    pgque.jsontriga('q35', 'ev_extra4=(select string_agg(s, '','') from app35.secret)');
-- (the message differs from PostgreSQL 16 on: "must be able to SET ROLE")
select left(pgque_test.error_of('alter table mallory35.m owner to app35'), 6) as give_table;
reset role;

-- a partitioned table of mallory's with a partition of app35's (attached by
-- a superuser), on which mallory holds TRIGGER too: the trigger's clone on
-- the partition is refused, and the trigger with it
create table mallory35.p (id int) partition by range (id);
alter table mallory35.p owner to mallory35;
create table app35.p1 partition of mallory35.p for values from (0) to (100);
alter table app35.p1 owner to app35;
grant trigger on app35.p1 to mallory35;
set role mallory35;
select pgque_test.error_of($$
    create trigger steal after insert on mallory35.p for each row execute function
        pgque.jsontriga('q35', 'ev_extra4=(select string_agg(s, '','') from app35.secret)')$$) as partition_clone;
select count(*) as steal_triggers from pg_trigger where tgname = 'steal' and tgrelid <> 'mallory35.m'::regclass;
reset role;

-- the owner's rights attach: a member of the owner's role, and a superuser
-- (what pg_restore does: CREATE TRIGGER after ALTER TABLE ... OWNER)
set role app35_dev;
create trigger dev after insert on app35.t for each row execute function
    pgque.jsontriga('q35', 'when=id > 1', 'ev_extra3=current_user');
reset role;
create trigger su after insert on app35.t for each row execute function
    pgque.logutriga('q35', 'ev_extra3=current_user');

-- mallory's insert fires only triggers that run nothing of its choosing,
-- and no event carries the secret
set role mallory35;
insert into app35.t values (1), (2);
reset role;
select ev_type, ev_extra3, ev_extra4 from pgque_test.events('q35') order by ev_id;
select count(*) as events_with_the_secret from pgque_test.events('q35')
 where concat(ev_data, ev_extra1, ev_extra2, ev_extra3, ev_extra4) like '%secret%';

drop schema app35, mallory35 cascade;
select pgque.drop_queue('q35');
drop owned by app35, app35_dev, mallory35;
drop role app35_dev, mallory35, app35;
