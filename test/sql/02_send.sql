-- Producing: every send/send_batch overload, insert_event, disable_insert.
select pgque.create_queue('s');

-- text payloads are stored byte for byte (an untyped literal is text)
select pgque.send('s', '  {"b":1,   "a":2}  ') as text_id;
-- jsonb payloads are validated and canonicalised
select pgque.send('s', '{"b":1,   "a":2}'::jsonb) as jsonb_id;
select pgque_test.error_of($$select pgque.send('s', '{not json'::jsonb)$$) as bad_json;
-- explicit type, text and jsonb
select pgque.send('s', 'file.created', 'a.txt') as typed_text,
       pgque.send('s', 'file.created', '{"f": "b.txt"}'::jsonb) as typed_jsonb;
-- keyed send: the key goes to ev_extra1; named arguments work
select pgque.send('s', 'file.deleted', 'c.txt', 'tenant-1') as keyed_text,
       pgque.send('s', 'file.deleted', '{"f":"d"}'::jsonb, 'tenant-2') as keyed_jsonb;
select pgque.send(queue_name => 's', type_name => 'named', payload => 'e', partition_key => 'tenant-3') as named;
select pgque.send(queue_name => 's', payload => 'f') as named_default_type;
-- a NULL key is allowed (it routes to slot 0); a NULL type is not
select pgque.send('s', 'nokey', 'g', null) as null_key;
select pgque_test.error_of($$select pgque.send('s', null::text, 'x')$$) as null_type;
select pgque_test.error_of($$select pgque.send('nope', 'x')$$) as unknown_queue;
select pgque_test.error_of($$select pgque.send(null, 'x')$$) as null_queue;
select * from pgque_test.events('s');

-- send_batch: ids follow the input order
select pgque.send_batch('s', array['b1', 'b2', 'b3']) as batch_default;
select pgque.send_batch('s', 'bulk', array['b4', null, 'b6']) as batch_typed_with_null;
select pgque.send_batch('s', array['{"z":1, "a":0}', '[1,  2]']::jsonb[]) as batch_jsonb;
select pgque.send_batch('s', 'bulk.json', array['{"k": "v"}']::jsonb[]) as batch_typed_jsonb;
select pgque.send_batch('s', 'keyed', array['k1', 'k2'], array['tenant-1', null]) as batch_keyed;
select pgque.send_batch('s', 'keyed.json', array['{"i":1}']::jsonb[], array['tenant-9']) as batch_keyed_jsonb;
select pgque.send_batch(queue_name => 's', type_name => 'named', payloads => array['n1'],
                        partition_keys => array['tenant-4']) as batch_named;
-- an empty array appends nothing and returns {}
select pgque.send_batch('s', array[]::text[]) as empty_batch,
       pgque.send_batch('s', 't', array[]::jsonb[]) as empty_jsonb_batch;
select * from pgque_test.events('s') where ev_id > 9;

-- send_batch rejections
select pgque_test.error_of($$select pgque.send_batch('s', null::text[])$$) as null_array;
select pgque_test.error_of($$select pgque.send_batch('s', 't', null::jsonb[])$$) as null_jsonb_array;
select pgque_test.error_of($$select pgque.send_batch('s', 't', array['a','b'], array['k'])$$) as keys_too_short;
select pgque_test.error_of($$select pgque.send_batch('s', 't', array['a'], null)$$) as null_keys;
select pgque_test.error_of($$select pgque.send_batch('s', 't', array[['a','b'],['c','d']])$$) as two_dims;
select pgque_test.error_of($$select pgque.send_batch('nope', array['a'])$$) as unknown_queue;
select pgque_test.error_of($$select pgque.send_batch('nope', array[]::text[])$$) as unknown_queue_empty;
select pgque_test.error_of($$select pgque.send_batch('s', null, array['a'])$$) as null_type;

-- insert_event, the PgQ primitive, with and without the extra columns
select pgque.insert_event('s', 'raw', 'r1') as raw3,
       pgque.insert_event('s', 'raw', 'r2', 'x1', 'x2', 'x3', 'x4') as raw7;
select * from pgque_test.events('s') where ev_type = 'raw';

-- disable_insert stops producers (but not session_replication_role = replica)
select pgque.set_queue_config('s', 'disable_insert', 'true');
select pgque_test.error_of($$select pgque.send('s', 'x')$$) as disabled_send;
select pgque_test.error_of($$select pgque.send_batch('s', array['x'])$$) as disabled_batch;
set session_replication_role = replica;
select pgque.insert_event('s', 'replica', 'allowed') is not null as replica_insert;
reset session_replication_role;
select pgque.set_queue_config('s', 'disable_insert', null);
select pgque.send('s', 'enabled again') is not null as enabled_again;

-- a new cursor starts at the latest tick, so this consumer sees every event
-- sent since (all of them: no tick was taken), exactly as stored, in ev_id order
select pgque.subscribe('s', 'reader');
select pgque.send('s', 'after subscribe');
select batch_no, msg_id, type, payload, extra1 from pgque_test.drain('s', 'reader');

-- a read-only transaction (or a standby) is refused with the standard
-- error, before anything else happens
begin transaction read only;
select pgque_test.error_of($$select pgque.send('s', 'x')$$) as send_read_only;
select pgque_test.error_of($$select pgque.send_batch('s', 'default', array['x'])$$) as batch_read_only;
rollback;
select pgque.drop_queue('s', true);
