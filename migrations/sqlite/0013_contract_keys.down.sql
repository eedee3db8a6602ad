DROP TABLE contract_keys;
