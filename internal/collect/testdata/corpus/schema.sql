-- Tables the corpus statements run against: pgbench's, a TPC-H-style
-- warehouse, and what Django, Rails, SQLAlchemy, Hibernate and Prisma
-- applications typically have. Small: the corpus is about statements.
CREATE TABLE pgbench_branches (bid int PRIMARY KEY, bbalance int, filler char(88));
CREATE TABLE pgbench_tellers (tid int PRIMARY KEY, bid int, tbalance int, filler char(84));
CREATE TABLE pgbench_accounts (aid int PRIMARY KEY, bid int, abalance int, filler char(84));
CREATE TABLE pgbench_history (tid int, bid int, aid int, delta int, mtime timestamp, filler char(22));
CREATE TABLE region (r_regionkey int PRIMARY KEY, r_name char(25), r_comment varchar(152));
CREATE TABLE nation (n_nationkey int PRIMARY KEY, n_name char(25), n_regionkey int, n_comment varchar(152));
CREATE TABLE supplier (s_suppkey int PRIMARY KEY, s_name char(25), s_address varchar(40), s_nationkey int, s_phone char(15), s_acctbal numeric(15,2), s_comment varchar(101));
CREATE TABLE customer (c_custkey int PRIMARY KEY, c_name varchar(25), c_address varchar(40), c_nationkey int, c_phone char(15), c_acctbal numeric(15,2), c_mktsegment char(10), c_comment varchar(117));
CREATE TABLE part (p_partkey int PRIMARY KEY, p_name varchar(55), p_mfgr char(25), p_brand char(10), p_type varchar(25), p_size int, p_container char(10), p_retailprice numeric(15,2), p_comment varchar(23));
CREATE TABLE partsupp (ps_partkey int, ps_suppkey int, ps_availqty int, ps_supplycost numeric(15,2), ps_comment varchar(199), PRIMARY KEY (ps_partkey, ps_suppkey));
CREATE TABLE orders (o_orderkey int PRIMARY KEY, o_custkey int, o_orderstatus char(1), o_totalprice numeric(15,2), o_orderdate date, o_orderpriority char(15), o_clerk char(15), o_shippriority int, o_comment varchar(79));
CREATE TABLE lineitem (l_orderkey int, l_partkey int, l_suppkey int, l_linenumber int, l_quantity numeric(15,2), l_extendedprice numeric(15,2), l_discount numeric(15,2), l_tax numeric(15,2), l_returnflag char(1), l_linestatus char(1), l_shipdate date, l_commitdate date, l_receiptdate date, l_shipinstruct char(25), l_shipmode char(10), l_comment varchar(44), PRIMARY KEY (l_orderkey, l_linenumber));
CREATE TABLE auth_user (id serial PRIMARY KEY, password varchar(128) NOT NULL, last_login timestamptz, is_superuser bool NOT NULL, username varchar(150) UNIQUE NOT NULL, first_name varchar(150) NOT NULL, last_name varchar(150) NOT NULL, email varchar(254) NOT NULL, is_staff bool NOT NULL, is_active bool NOT NULL, date_joined timestamptz NOT NULL);
CREATE TABLE blog_post (id bigserial PRIMARY KEY, author_id int NOT NULL REFERENCES auth_user, title varchar(200) NOT NULL, body text NOT NULL, published_at timestamptz, views int NOT NULL DEFAULT 0, tags text[] NOT NULL DEFAULT '{}', meta jsonb NOT NULL DEFAULT '{}');
CREATE TABLE users (id bigserial PRIMARY KEY, email varchar NOT NULL UNIQUE, name varchar, created_at timestamp(6) NOT NULL, updated_at timestamp(6) NOT NULL, deleted_at timestamp(6));
CREATE TABLE posts (id bigserial PRIMARY KEY, user_id bigint NOT NULL, title varchar, published boolean DEFAULT false, created_at timestamp(6) NOT NULL, updated_at timestamp(6) NOT NULL);
CREATE TABLE "User" (id text PRIMARY KEY, email text NOT NULL UNIQUE, name text, "createdAt" timestamp(3) NOT NULL DEFAULT CURRENT_TIMESTAMP);
CREATE TABLE "Post" (id text PRIMARY KEY, title text NOT NULL, published boolean NOT NULL DEFAULT false, "authorId" text REFERENCES "User");
CREATE TABLE customer_account (account_id bigint PRIMARY KEY, balance numeric(18,0) NOT NULL, currency char(3) NOT NULL, version int NOT NULL, opened_on date NOT NULL);
CREATE TABLE jobs (id bigserial PRIMARY KEY, queue text NOT NULL, status text NOT NULL, payload jsonb NOT NULL, attempts int NOT NULL DEFAULT 0, run_at timestamptz NOT NULL DEFAULT now(), locked_at timestamptz, locked_by text);
CREATE TABLE events (id bigserial PRIMARY KEY, kind text NOT NULL, created_at timestamptz NOT NULL, duration interval, amount numeric(12,2), tenant uuid NOT NULL);
CREATE TABLE inventory (sku text PRIMARY KEY, qty int NOT NULL, updated timestamptz NOT NULL DEFAULT now());
INSERT INTO auth_user (password, is_superuser, username, first_name, last_name, email, is_staff, is_active, date_joined) VALUES ('x', false, 'alice', 'Alice', 'A', 'alice@example.com', false, true, now());
INSERT INTO customer_account VALUES (12, 50, 'EUR', 1, '2024-01-01');
