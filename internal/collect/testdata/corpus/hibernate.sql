-- What Hibernate 6 generates (aliases like c1_0, optimistic locking).
select c1_0.account_id,c1_0.balance,c1_0.currency,c1_0.opened_on,c1_0.version from customer_account c1_0 where c1_0.account_id=12;
update customer_account set balance=100,currency='EUR',opened_on='2024-01-01',version=2 where account_id=12 and version=1;
insert into customer_account (balance,currency,opened_on,version,account_id) values (0,'USD','2024-05-01',0,13);
select c1_0.account_id from customer_account c1_0 where c1_0.account_id=12 for update;
select c1_0.account_id,c1_0.balance from customer_account c1_0 where c1_0.opened_on between '2024-01-01' and '2024-12-31' order by c1_0.balance desc offset 0 rows fetch first 50 rows only;
delete from customer_account where account_id=13 and version=0;
