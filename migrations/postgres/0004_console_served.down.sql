DROP TABLE console_served;
