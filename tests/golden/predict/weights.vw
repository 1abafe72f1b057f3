1 |a x y
-1 2.5 |a x
1 0.1 't1|a y z
-1 0 t2|a z
1 1e-3 |a x z
-1 7 'with_tag |a y
1 0.30000000000000004 |a x y z
