-- The rows every test starts from (run by the superuser; RLS does not apply to it).
-- User A: aaaaaaaa-..., user B: bbbbbbbb-... (see rig/__init__.py USER_A / USER_B).
TRUNCATE public.orders, public.tickets, public.secrets, public.accounts, public.products,
  public.profiles
  RESTART IDENTITY CASCADE;

INSERT INTO public.profiles (id, email, display_name) VALUES
  ('aaaaaaaa-aaaa-4aaa-8aaa-aaaaaaaaaaaa', 'ada@example.test', 'Ada'),
  ('bbbbbbbb-bbbb-4bbb-8bbb-bbbbbbbbbbbb', 'bob@example.test', 'Bob');

INSERT INTO public.orders (user_id, status, total, created_at, meta) VALUES
  ('aaaaaaaa-aaaa-4aaa-8aaa-aaaaaaaaaaaa', 'paid',    120.50, '2026-01-05 10:00:00+00', '{"channel": "web", "token": "tok-a1"}'),
  ('aaaaaaaa-aaaa-4aaa-8aaa-aaaaaaaaaaaa', 'shipped',  35.00, '2026-01-09 12:30:00+00', '{"channel": "app", "token": "tok-a2"}'),
  ('aaaaaaaa-aaaa-4aaa-8aaa-aaaaaaaaaaaa', 'new',       9.99, '2026-02-01 08:15:00+00', '{"channel": "web", "token": "tok-a3"}'),
  ('bbbbbbbb-bbbb-4bbb-8bbb-bbbbbbbbbbbb', 'paid',    999.00, '2026-01-07 16:45:00+00', '{"channel": "web", "token": "tok-b1"}'),
  ('bbbbbbbb-bbbb-4bbb-8bbb-bbbbbbbbbbbb', 'refunded', 42.00, '2026-01-20 09:00:00+00', '{"channel": "phone", "token": "tok-b2"}');

INSERT INTO public.products (name, price, in_stock) VALUES
  ('Widget', 9.99, true),
  ('Gadget', 35.00, true),
  ('Gizmo', 120.50, false),
  ('Doohickey', 4.25, true);

INSERT INTO public.tickets (user_id, subject, body, status) VALUES
  ('aaaaaaaa-aaaa-4aaa-8aaa-aaaaaaaaaaaa', 'Where is my parcel?', 'Order 2 has not arrived.', 'open'),
  ('bbbbbbbb-bbbb-4bbb-8bbb-bbbbbbbbbbbb', 'Refund please', 'Order 5 was broken.', 'pending');

INSERT INTO public.secrets (name, value, owner_id) VALUES
  ('stripe', 'sk_live_NEVER_SHOW_THIS', 'aaaaaaaa-aaaa-4aaa-8aaa-aaaaaaaaaaaa');

INSERT INTO public.accounts (label, plan, api_key) VALUES
  ('acme', 'pro', 'ak_live_HIDDEN_COLUMN_1'),
  ('globex', 'free', 'ak_live_HIDDEN_COLUMN_2');
