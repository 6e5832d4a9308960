SELECT sum(CASE WHEN kind = 'full' THEN amount ELSE amount * 0.9::float8 END) FROM invoice_lines
