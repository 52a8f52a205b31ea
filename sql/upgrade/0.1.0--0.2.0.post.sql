-- 0.1.0 -> 0.2.0, hand-written steps that need the 0.2.0 functions (they
-- run after every function was replayed; ADR 0019).

-- pgque.config keeps one row whatever loads it (ADR 0022).
create trigger config_one_row before insert on pgque.config
    for each row execute function pgque._config_one_row();
