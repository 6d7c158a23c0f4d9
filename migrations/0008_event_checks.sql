-- An event's sales close after they open. The Rust client and the CLI
-- refuse such an event first (invalid_event, naming the field); this check
-- holds for events written by SQL too. NOT VALID: an event made before it
-- is kept as it is (it is simply never on sale), and only rows written from
-- now on are checked.
ALTER TABLE seatq.events
    ADD CONSTRAINT events_sales_window CHECK (sales_until > sales_from) NOT VALID;
