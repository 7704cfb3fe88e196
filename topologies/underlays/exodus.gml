graph [
  node [
    id 0
    label "San+Jose,+CA471"
  ]
  node [
    id 1
    label "Santa+Clara,+CA444"
  ]
  node [
    id 2
    label "Santa+Clara,+CA389"
  ]
  node [
    id 3
    label "San+Jose,+CA472"
  ]
  node [
    id 4
    label "Oak+Brook,+IL301"
  ]
  node [
    id 5
    label "Santa+Clara,+CA430"
  ]
  node [
    id 6
    label "Santa+Clara,+CA431"
  ]
  node [
    id 7
    label "Weehawken,+NJ543"
  ]
  node [
    id 8
    label "New+York,+NY293"
  ]
  node [
    id 9
    label "Atlanta,+GA127"
  ]
  node [
    id 10
    label "New+York,+NY294"
  ]
  node [
    id 11
    label "Weehawken,+NJ544"
  ]
  node [
    id 12
    label "Weehawken,+NJ552"
  ]
  node [
    id 13
    label "Oak+Brook,+IL300"
  ]
  node [
    id 14
    label "Jersey+City,+NJ244"
  ]
  node [
    id 15
    label "Oak+Brook,+IL307"
  ]
  node [
    id 16
    label "Oak+Brook,+IL315"
  ]
  node [
    id 17
    label "Herndon,+VA193"
  ]
  node [
    id 18
    label "Herndon,+VA496"
  ]
  node [
    id 19
    label "Atlanta,+GA126"
  ]
  node [
    id 20
    label "Jersey+City,+NJ245"
  ]
  node [
    id 21
    label "London274"
  ]
  node [
    id 22
    label "London275"
  ]
  node [
    id 23
    label "London276"
  ]
  node [
    id 24
    label "Herndon,+VA495"
  ]
  node [
    id 25
    label "Oak+Brook,+IL308"
  ]
  node [
    id 26
    label "Toronto,+Canada537"
  ]
  node [
    id 27
    label "Waltham,+MA555"
  ]
  node [
    id 28
    label "Oak+Brook,+IL309"
  ]
  node [
    id 29
    label "Toronto,+Canada538"
  ]
  node [
    id 30
    label "Palo+Alto,+CA317"
  ]
  node [
    id 31
    label "Santa+Clara,+CA388"
  ]
  node [
    id 32
    label "Palo+Alto,+CA104"
  ]
  node [
    id 33
    label "Santa+Clara,+CA336"
  ]
  node [
    id 34
    label "Palo+Alto,+CA318"
  ]
  node [
    id 35
    label "Santa+Clara,+CA363"
  ]
  node [
    id 36
    label "Santa+Clara,+CA364"
  ]
  node [
    id 37
    label "Amsterdam119"
  ]
  node [
    id 38
    label "Frankfurt185"
  ]
  node [
    id 39
    label "Tukwila,+WA508"
  ]
  node [
    id 40
    label "Tukwila,+WA509"
  ]
  node [
    id 41
    label "Santa+Clara,+CA429"
  ]
  node [
    id 42
    label "Chicago,+IL155"
  ]
  node [
    id 43
    label "Oak+Brook,+IL310"
  ]
  node [
    id 44
    label "San+Jose,+CA460"
  ]
  node [
    id 45
    label "Santa+Clara,+CA365"
  ]
  node [
    id 46
    label "Santa+Clara,+CA403"
  ]
  node [
    id 47
    label "Santa+Clara,+CA443"
  ]
  node [
    id 48
    label "Chicago,+IL156"
  ]
  node [
    id 49
    label "Fort+Worth,+TX189"
  ]
  node [
    id 50
    label "Irvine,+CA228"
  ]
  node [
    id 51
    label "Austin,+TX137"
  ]
  node [
    id 52
    label "Fort+Worth,+TX190"
  ]
  node [
    id 53
    label "Fort+Worth,+TX191"
  ]
  node [
    id 54
    label "Herndon,+VA208"
  ]
  node [
    id 55
    label "Jersey+City,+NJ261"
  ]
  node [
    id 56
    label "Frankfurt184"
  ]
  node [
    id 57
    label "Waltham,+MA568"
  ]
  node [
    id 58
    label "London277"
  ]
  node [
    id 59
    label "Waltham,+MA569"
  ]
  node [
    id 60
    label "Irvine,+CA212"
  ]
  node [
    id 61
    label "El+Segundo,+CA163"
  ]
  node [
    id 62
    label "Tokyo525"
  ]
  node [
    id 63
    label "Santa+Clara,+CA404"
  ]
  node [
    id 64
    label "Tokyo526"
  ]
  node [
    id 65
    label "Irvine,+CA213"
  ]
  node [
    id 66
    label "El+Segundo,+CA164"
  ]
  node [
    id 67
    label "Waltham,+MA556"
  ]
  node [
    id 68
    label "Herndon,+VA206"
  ]
  node [
    id 69
    label "San+Jose,+CA459"
  ]
  node [
    id 70
    label "Atlanta,+GA133"
  ]
  node [
    id 71
    label "Miami,+FL285"
  ]
  node [
    id 72
    label "Miami,+FL286"
  ]
  node [
    id 73
    label "Irvine,+CA229"
  ]
  node [
    id 74
    label "Austin,+TX136"
  ]
  node [
    id 75
    label "Irvine,+CA237"
  ]
  node [
    id 76
    label "Irvine,+CA230"
  ]
  node [
    id 77
    label "Irvine,+CA231"
  ]
  node [
    id 78
    label "Santa+Clara,+CA405"
  ]
  edge [
    source 0
    target 1
    distance 21.537793763270834
  ]
  edge [
    source 0
    target 2
    distance 21.537793763270834
  ]
  edge [
    source 0
    target 3
    distance 0.0
  ]
  edge [
    source 0
    target 4
    distance 2938.933275120972
  ]
  edge [
    source 1
    target 32
    distance 48.184319463938344
  ]
  edge [
    source 1
    target 46
    distance 0.0
  ]
  edge [
    source 1
    target 63
    distance 0.0
  ]
  edge [
    source 1
    target 47
    distance 0.0
  ]
  edge [
    source 2
    target 3
    distance 21.537793763270834
  ]
  edge [
    source 2
    target 31
    distance 0.0
  ]
  edge [
    source 2
    target 47
    distance 0.0
  ]
  edge [
    source 2
    target 46
    distance 0.0
  ]
  edge [
    source 3
    target 5
    distance 21.537793763270834
  ]
  edge [
    source 3
    target 6
    distance 21.537793763270834
  ]
  edge [
    source 4
    target 15
    distance 0.0
  ]
  edge [
    source 4
    target 25
    distance 0.0
  ]
  edge [
    source 4
    target 28
    distance 0.0
  ]
  edge [
    source 4
    target 43
    distance 0.0
  ]
  edge [
    source 4
    target 16
    distance 0.0
  ]
  edge [
    source 4
    target 42
    distance 27.00556289816714
  ]
  edge [
    source 4
    target 13
    distance 0.0
  ]
  edge [
    source 5
    target 31
    distance 0.0
  ]
  edge [
    source 5
    target 41
    distance 0.0
  ]
  edge [
    source 5
    target 63
    distance 0.0
  ]
  edge [
    source 5
    target 36
    distance 0.0
  ]
  edge [
    source 5
    target 33
    distance 0.0
  ]
  edge [
    source 5
    target 47
    distance 0.0
  ]
  edge [
    source 6
    target 41
    distance 0.0
  ]
  edge [
    source 6
    target 35
    distance 0.0
  ]
  edge [
    source 6
    target 36
    distance 0.0
  ]
  edge [
    source 6
    target 45
    distance 0.0
  ]
  edge [
    source 6
    target 47
    distance 0.0
  ]
  edge [
    source 7
    target 8
    distance 6.425732317424714
  ]
  edge [
    source 7
    target 9
    distance 1203.9574941353012
  ]
  edge [
    source 7
    target 10
    distance 6.425732317424714
  ]
  edge [
    source 7
    target 11
    distance 0.0
  ]
  edge [
    source 7
    target 12
    distance 0.0
  ]
  edge [
    source 7
    target 13
    distance 1170.914370720661
  ]
  edge [
    source 7
    target 14
    distance 6.669339377524074
  ]
  edge [
    source 8
    target 11
    distance 6.425732317424714
  ]
  edge [
    source 8
    target 68
    distance 2269.2782581877664
  ]
  edge [
    source 8
    target 54
    distance 2269.2782581877664
  ]
  edge [
    source 8
    target 71
    distance 1753.067653062323
  ]
  edge [
    source 8
    target 10
    distance 0.0
  ]
  edge [
    source 9
    target 17
    distance 1611.1460879143733
  ]
  edge [
    source 9
    target 19
    distance 0.0
  ]
  edge [
    source 9
    target 72
    distance 972.4458573042972
  ]
  edge [
    source 9
    target 52
    distance 1210.3280637929627
  ]
  edge [
    source 9
    target 70
    distance 0.0
  ]
  edge [
    source 10
    target 20
    distance 6.2895817337946
  ]
  edge [
    source 11
    target 20
    distance 6.669339377524074
  ]
  edge [
    source 11
    target 21
    distance 5582.252582938819
  ]
  edge [
    source 11
    target 22
    distance 5582.252582938819
  ]
  edge [
    source 11
    target 23
    distance 5582.252582938819
  ]
  edge [
    source 11
    target 12
    distance 0.0
  ]
  edge [
    source 11
    target 24
    distance 2267.3580821797736
  ]
  edge [
    source 12
    target 13
    distance 1170.914370720661
  ]
  edge [
    source 13
    target 15
    distance 0.0
  ]
  edge [
    source 13
    target 25
    distance 0.0
  ]
  edge [
    source 13
    target 28
    distance 0.0
  ]
  edge [
    source 13
    target 29
    distance 729.0712676804624
  ]
  edge [
    source 13
    target 43
    distance 0.0
  ]
  edge [
    source 13
    target 16
    distance 0.0
  ]
  edge [
    source 13
    target 48
    distance 27.00556289816714
  ]
  edge [
    source 13
    target 27
    distance 1381.174513925828
  ]
  edge [
    source 13
    target 67
    distance 1381.174513925828
  ]
  edge [
    source 14
    target 55
    distance 0.0
  ]
  edge [
    source 14
    target 56
    distance 6223.046038446504
  ]
  edge [
    source 14
    target 20
    distance 0.0
  ]
  edge [
    source 14
    target 57
    distance 299.45906745292376
  ]
  edge [
    source 14
    target 58
    distance 5588.898377174292
  ]
  edge [
    source 14
    target 59
    distance 299.45906745292376
  ]
  edge [
    source 15
    target 16
    distance 0.0
  ]
  edge [
    source 16
    target 25
    distance 0.0
  ]
  edge [
    source 17
    target 18
    distance 0.0
  ]
  edge [
    source 17
    target 19
    distance 1611.1460879143733
  ]
  edge [
    source 18
    target 24
    distance 0.0
  ]
  edge [
    source 18
    target 41
    distance 1841.007885775286
  ]
  edge [
    source 19
    target 70
    distance 0.0
  ]
  edge [
    source 20
    target 55
    distance 0.0
  ]
  edge [
    source 20
    target 21
    distance 5588.898377174292
  ]
  edge [
    source 20
    target 22
    distance 5588.898377174292
  ]
  edge [
    source 20
    target 23
    distance 5588.898377174292
  ]
  edge [
    source 21
    target 37
    distance 358.40050051031875
  ]
  edge [
    source 22
    target 37
    distance 358.40050051031875
  ]
  edge [
    source 24
    target 54
    distance 0.0
  ]
  edge [
    source 26
    target 27
    distance 678.9461063101284
  ]
  edge [
    source 27
    target 67
    distance 0.0
  ]
  edge [
    source 27
    target 57
    distance 0.0
  ]
  edge [
    source 30
    target 31
    distance 48.184319463938344
  ]
  edge [
    source 30
    target 32
    distance 0.0
  ]
  edge [
    source 30
    target 33
    distance 48.184319463938344
  ]
  edge [
    source 30
    target 34
    distance 0.0
  ]
  edge [
    source 31
    target 44
    distance 21.537793763270834
  ]
  edge [
    source 32
    target 45
    distance 48.184319463938344
  ]
  edge [
    source 32
    target 46
    distance 48.184319463938344
  ]
  edge [
    source 33
    target 64
    distance 8372.352046117057
  ]
  edge [
    source 34
    target 35
    distance 48.184319463938344
  ]
  edge [
    source 34
    target 36
    distance 48.184319463938344
  ]
  edge [
    source 37
    target 38
    distance 365.048785326527
  ]
  edge [
    source 39
    target 40
    distance 0.0
  ]
  edge [
    source 39
    target 41
    distance 1137.2519514894134
  ]
  edge [
    source 39
    target 42
    distance 2790.880213832251
  ]
  edge [
    source 40
    target 42
    distance 2790.880213832251
  ]
  edge [
    source 41
    target 69
    distance 21.537793763270834
  ]
  edge [
    source 41
    target 46
    distance 0.0
  ]
  edge [
    source 42
    target 48
    distance 0.0
  ]
  edge [
    source 44
    target 64
    distance 8350.824242318486
  ]
  edge [
    source 44
    target 69
    distance 0.0
  ]
  edge [
    source 44
    target 47
    distance 21.537793763270834
  ]
  edge [
    source 46
    target 49
    distance 2271.2977577183888
  ]
  edge [
    source 46
    target 66
    distance 472.3550074130231
  ]
  edge [
    source 46
    target 63
    distance 0.0
  ]
  edge [
    source 46
    target 78
    distance 0.0
  ]
  edge [
    source 47
    target 66
    distance 472.3550074130231
  ]
  edge [
    source 47
    target 63
    distance 0.0
  ]
  edge [
    source 48
    target 49
    distance 1326.907830021701
  ]
  edge [
    source 49
    target 50
    distance 1910.0749925069567
  ]
  edge [
    source 49
    target 51
    distance 277.95938797159005
  ]
  edge [
    source 49
    target 52
    distance 0.0
  ]
  edge [
    source 49
    target 53
    distance 0.0
  ]
  edge [
    source 50
    target 65
    distance 0.0
  ]
  edge [
    source 50
    target 52
    distance 1910.0749925069567
  ]
  edge [
    source 50
    target 73
    distance 0.0
  ]
  edge [
    source 50
    target 75
    distance 0.0
  ]
  edge [
    source 50
    target 76
    distance 0.0
  ]
  edge [
    source 50
    target 77
    distance 0.0
  ]
  edge [
    source 51
    target 61
    distance 1989.1422544880543
  ]
  edge [
    source 52
    target 73
    distance 1910.0749925069567
  ]
  edge [
    source 52
    target 74
    distance 277.95938797159005
  ]
  edge [
    source 52
    target 53
    distance 0.0
  ]
  edge [
    source 54
    target 68
    distance 0.0
  ]
  edge [
    source 57
    target 59
    distance 0.0
  ]
  edge [
    source 59
    target 67
    distance 0.0
  ]
  edge [
    source 60
    target 61
    distance 60.329676358720185
  ]
  edge [
    source 61
    target 63
    distance 472.3550074130231
  ]
  edge [
    source 61
    target 78
    distance 472.3550074130231
  ]
  edge [
    source 61
    target 66
    distance 0.0
  ]
  edge [
    source 62
    target 63
    distance 8372.352046117057
  ]
  edge [
    source 62
    target 64
    distance 0.0
  ]
  edge [
    source 63
    target 65
    distance 526.782306621641
  ]
  edge [
    source 65
    target 66
    distance 60.329676358720185
  ]
  edge [
    source 66
    target 73
    distance 60.329676358720185
  ]
  edge [
    source 66
    target 76
    distance 60.329676358720185
  ]
  edge [
    source 66
    target 77
    distance 60.329676358720185
  ]
  edge [
    source 71
    target 72
    distance 0.0
  ]
  edge [
    source 75
    target 77
    distance 0.0
  ]
]
