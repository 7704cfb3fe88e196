graph [
  node [
    id 0
    label "Ashburn"
  ]
  node [
    id 1
    label "Atlanta"
  ]
  node [
    id 2
    label "Boston"
  ]
  node [
    id 3
    label "Chicago"
  ]
  node [
    id 4
    label "Dallas"
  ]
  node [
    id 5
    label "Denver"
  ]
  node [
    id 6
    label "Hayward"
  ]
  node [
    id 7
    label "Jacksonville"
  ]
  node [
    id 8
    label "Los Angeles"
  ]
  node [
    id 9
    label "Miami, Florida"
  ]
  node [
    id 10
    label "Minneapolis"
  ]
  node [
    id 11
    label "Montreal"
  ]
  node [
    id 12
    label "New York"
  ]
  node [
    id 13
    label "Newark"
  ]
  node [
    id 14
    label "Palo Alto"
  ]
  node [
    id 15
    label "Phoenix"
  ]
  node [
    id 16
    label "Philadelphie"
  ]
  node [
    id 17
    label "San Jos&#233;"
  ]
  node [
    id 18
    label "Seattle"
  ]
  node [
    id 19
    label "South Bend"
  ]
  node [
    id 20
    label "Saint-Louis"
  ]
  node [
    id 21
    label "Toronto"
  ]
  edge [
    source 0
    target 1
    distance 853.092138569981
  ]
  edge [
    source 0
    target 2
    distance 656.1050233533227
  ]
  edge [
    source 0
    target 3
    distance 914.7931440112123
  ]
  edge [
    source 0
    target 4
    distance 1871.8497206105035
  ]
  edge [
    source 0
    target 5
    distance 2360.7635276410233
  ]
  edge [
    source 0
    target 6
    distance 3861.238099417768
  ]
  edge [
    source 0
    target 7
    distance 1038.8167298401481
  ]
  edge [
    source 0
    target 8
    distance 3659.9254502862022
  ]
  edge [
    source 0
    target 9
    distance 1493.1730813485979
  ]
  edge [
    source 0
    target 10
    distance 1460.314133508598
  ]
  edge [
    source 0
    target 11
    distance 784.7182852703806
  ]
  edge [
    source 0
    target 12
    distance 350.7274179039602
  ]
  edge [
    source 0
    target 13
    distance 340.09192786503445
  ]
  edge [
    source 0
    target 14
    distance 3875.0396766120275
  ]
  edge [
    source 0
    target 15
    distance 3150.395323451448
  ]
  edge [
    source 0
    target 16
    distance 223.91829894009163
  ]
  edge [
    source 0
    target 17
    distance 3291.057525681416
  ]
  edge [
    source 0
    target 18
    distance 3703.863435823853
  ]
  edge [
    source 0
    target 19
    distance 799.4411175954349
  ]
  edge [
    source 0
    target 20
    distance 1107.0975338837575
  ]
  edge [
    source 0
    target 21
    distance 535.9576979790359
  ]
  edge [
    source 1
    target 2
    distance 1507.6624250172397
  ]
  edge [
    source 1
    target 3
    distance 945.669819979863
  ]
  edge [
    source 1
    target 4
    distance 1160.3093237645205
  ]
  edge [
    source 1
    target 5
    distance 1950.2543888674109
  ]
  edge [
    source 1
    target 6
    distance 3415.331025537143
  ]
  edge [
    source 1
    target 7
    distance 458.5005551052243
  ]
  edge [
    source 1
    target 8
    distance 3116.7493686467387
  ]
  edge [
    source 1
    target 9
    distance 972.4458573042972
  ]
  edge [
    source 1
    target 10
    distance 1460.4437251473812
  ]
  edge [
    source 1
    target 11
    distance 1596.1913126477234
  ]
  edge [
    source 1
    target 12
    distance 1201.1440348933015
  ]
  edge [
    source 1
    target 13
    distance 1191.4596373072573
  ]
  edge [
    source 1
    target 14
    distance 3424.240113073714
  ]
  edge [
    source 1
    target 15
    distance 2561.975341569105
  ]
  edge [
    source 1
    target 16
    distance 1071.8150213152555
  ]
  edge [
    source 1
    target 17
    distance 2637.629154073622
  ]
  edge [
    source 1
    target 18
    distance 3511.5906138185537
  ]
  edge [
    source 1
    target 19
    distance 895.7078127749027
  ]
  edge [
    source 1
    target 20
    distance 756.608036904567
  ]
  edge [
    source 1
    target 21
    distance 1181.9884696133283
  ]
  edge [
    source 2
    target 3
    distance 1368.8695284111764
  ]
  edge [
    source 2
    target 4
    distance 2497.1451457966486
  ]
  edge [
    source 2
    target 5
    distance 2848.0633403346264
  ]
  edge [
    source 2
    target 6
    distance 4321.627456137574
  ]
  edge [
    source 2
    target 7
    distance 1636.0862626069988
  ]
  edge [
    source 2
    target 8
    distance 4178.661612636315
  ]
  edge [
    source 2
    target 9
    distance 2020.8419840751033
  ]
  edge [
    source 2
    target 10
    distance 1808.5925442786931
  ]
  edge [
    source 2
    target 11
    distance 404.2815293402504
  ]
  edge [
    source 2
    target 12
    distance 306.5470647537847
  ]
  edge [
    source 2
    target 13
    distance 316.2933444157174
  ]
  edge [
    source 2
    target 14
    distance 4337.993871179956
  ]
  edge [
    source 2
    target 15
    distance 3701.465145882
  ]
  edge [
    source 2
    target 16
    distance 436.0523329701142
  ]
  edge [
    source 2
    target 17
    distance 3811.3338106464407
  ]
  edge [
    source 2
    target 18
    distance 4010.8970024672603
  ]
  edge [
    source 2
    target 19
    distance 1258.779784626528
  ]
  edge [
    source 2
    target 20
    distance 1673.2285821168553
  ]
  edge [
    source 2
    target 21
    distance 693.5194146870052
  ]
  edge [
    source 3
    target 4
    distance 1294.7628809401672
  ]
  edge [
    source 3
    target 5
    distance 1481.308182717579
  ]
  edge [
    source 3
    target 6
    distance 2968.466497441696
  ]
  edge [
    source 3
    target 7
    distance 1388.1190621943686
  ]
  edge [
    source 3
    target 8
    distance 2809.7929313533255
  ]
  edge [
    source 3
    target 9
    distance 1911.9107209890813
  ]
  edge [
    source 3
    target 10
    distance 571.9581870978088
  ]
  edge [
    source 3
    target 11
    distance 1197.4957582515608
  ]
  edge [
    source 3
    target 12
    distance 1146.7355698523086
  ]
  edge [
    source 3
    target 13
    distance 1132.4534127116528
  ]
  edge [
    source 3
    target 14
    distance 2983.610365920602
  ]
  edge [
    source 3
    target 15
    distance 2340.663525039403
  ]
  edge [
    source 3
    target 16
    distance 1070.2277353308973
  ]
  edge [
    source 3
    target 17
    distance 3556.403113632256
  ]
  edge [
    source 3
    target 18
    distance 2796.4910507988893
  ]
  edge [
    source 3
    target 19
    distance 116.23887254807731
  ]
  edge [
    source 3
    target 20
    distance 421.36371573488475
  ]
  edge [
    source 3
    target 21
    distance 702.4693684489885
  ]
  edge [
    source 4
    target 5
    distance 1066.0116946958742
  ]
  edge [
    source 4
    target 6
    distance 2357.1613418705715
  ]
  edge [
    source 4
    target 7
    distance 1461.5780412555603
  ]
  edge [
    source 4
    target 8
    distance 1996.128821740945
  ]
  edge [
    source 4
    target 9
    distance 1787.4605279387554
  ]
  edge [
    source 4
    target 10
    distance 1388.3351906346131
  ]
  edge [
    source 4
    target 11
    distance 2437.565143524372
  ]
  edge [
    source 4
    target 12
    distance 2209.332009366533
  ]
  edge [
    source 4
    target 13
    distance 2196.5625813504944
  ]
  edge [
    source 4
    target 14
    distance 2361.788770852208
  ]
  edge [
    source 4
    target 15
    distance 1426.5630927378922
  ]
  edge [
    source 4
    target 16
    distance 2091.6110999555267
  ]
  edge [
    source 4
    target 17
    distance 2846.7178430270765
  ]
  edge [
    source 4
    target 18
    distance 2705.9620226203533
  ]
  edge [
    source 4
    target 19
    distance 1359.2200159388317
  ]
  edge [
    source 4
    target 20
    distance 880.987875343986
  ]
  edge [
    source 4
    target 21
    distance 1938.1200945218004
  ]
  edge [
    source 5
    target 6
    distance 1502.3883254570585
  ]
  edge [
    source 5
    target 7
    distance 2361.071316063779
  ]
  edge [
    source 5
    target 8
    distance 1337.6088195024995
  ]
  edge [
    source 5
    target 9
    distance 2776.772441661433
  ]
  edge [
    source 5
    target 10
    distance 1125.5996537681995
  ]
  edge [
    source 5
    target 11
    distance 2634.1022923267255
  ]
  edge [
    source 5
    target 12
    distance 2625.1825376590227
  ]
  edge [
    source 5
    target 13
    distance 2610.9128484135153
  ]
  edge [
    source 5
    target 14
    distance 1515.401823286749
  ]
  edge [
    source 5
    target 15
    distance 942.6026317734892
  ]
  edge [
    source 5
    target 16
    distance 2540.3754110565246
  ]
  edge [
    source 5
    target 17
    distance 3897.8806160833515
  ]
  edge [
    source 5
    target 18
    distance 1643.6694018036476
  ]
  edge [
    source 5
    target 19
    distance 1594.5384339202137
  ]
  edge [
    source 5
    target 20
    distance 1277.9020959762138
  ]
  edge [
    source 5
    target 21
    distance 2165.8585552229424
  ]
  edge [
    source 6
    target 7
    distance 3791.85128020832
  ]
  edge [
    source 6
    target 8
    distance 530.048691417085
  ]
  edge [
    source 6
    target 9
    distance 4144.463315139111
  ]
  edge [
    source 6
    target 10
    distance 2529.5666962723058
  ]
  edge [
    source 6
    target 11
    distance 4070.0798505550374
  ]
  edge [
    source 6
    target 12
    distance 4115.157600594571
  ]
  edge [
    source 6
    target 13
    distance 4100.877018910719
  ]
  edge [
    source 6
    target 14
    distance 25.876368376970767
  ]
  edge [
    source 6
    target 15
    distance 1020.1424425903446
  ]
  edge [
    source 6
    target 16
    distance 4035.79580034461
  ]
  edge [
    source 6
    target 17
    distance 4885.874024141959
  ]
  edge [
    source 6
    target 18
    distance 1103.8274544017725
  ]
  edge [
    source 6
    target 19
    distance 3083.7161208321527
  ]
  edge [
    source 6
    target 20
    distance 2778.5333783736146
  ]
  edge [
    source 6
    target 21
    distance 3630.1303355318873
  ]
  edge [
    source 7
    target 8
    distance 3456.242142276545
  ]
  edge [
    source 7
    target 9
    distance 525.1442000899008
  ]
  edge [
    source 7
    target 10
    distance 1916.8752066629065
  ]
  edge [
    source 7
    target 11
    distance 1823.534981312184
  ]
  edge [
    source 7
    target 12
    distance 1343.2578145236457
  ]
  edge [
    source 7
    target 13
    distance 1337.7294648457837
  ]
  edge [
    source 7
    target 14
    distance 3798.8637966173937
  ]
  edge [
    source 7
    target 15
    distance 2888.1095391575845
  ]
  edge [
    source 7
    target 16
    distance 1219.4528114234558
  ]
  edge [
    source 7
    target 17
    distance 2272.5097157828986
  ]
  edge [
    source 7
    target 18
    distance 3950.9790338227917
  ]
  edge [
    source 7
    target 19
    distance 1325.3297895421867
  ]
  edge [
    source 7
    target 20
    distance 1212.7687219221662
  ]
  edge [
    source 7
    target 21
    distance 1491.9824975577935
  ]
  edge [
    source 8
    target 9
    distance 3764.178218478144
  ]
  edge [
    source 8
    target 10
    distance 2451.9150654422638
  ]
  edge [
    source 8
    target 11
    distance 3971.6882636030427
  ]
  edge [
    source 8
    target 12
    distance 3944.2753995585103
  ]
  edge [
    source 8
    target 13
    distance 3930.0870535113413
  ]
  edge [
    source 8
    target 14
    distance 516.6674113131854
  ]
  edge [
    source 8
    target 15
    distance 575.382469375544
  ]
  edge [
    source 8
    target 16
    distance 3851.9414637430505
  ]
  edge [
    source 8
    target 17
    distance 4387.620635097471
  ]
  edge [
    source 8
    target 18
    distance 1543.1631774793375
  ]
  edge [
    source 8
    target 19
    distance 2920.5425489307713
  ]
  edge [
    source 8
    target 20
    distance 2554.2267928376805
  ]
  edge [
    source 8
    target 21
    distance 3501.3538465544902
  ]
  edge [
    source 9
    target 10
    distance 2432.047473619605
  ]
  edge [
    source 9
    target 11
    distance 2266.148781317169
  ]
  edge [
    source 9
    target 12
    distance 1753.067653062323
  ]
  edge [
    source 9
    target 13
    distance 1750.4839700983605
  ]
  edge [
    source 9
    target 14
    distance 4148.824376396919
  ]
  edge [
    source 9
    target 15
    distance 3188.9544038360814
  ]
  edge [
    source 9
    target 16
    distance 1640.630198694813
  ]
  edge [
    source 9
    target 17
    distance 1800.7628087043818
  ]
  edge [
    source 9
    target 18
    distance 4399.137405378049
  ]
  edge [
    source 9
    target 19
    distance 1850.4496909153943
  ]
  edge [
    source 9
    target 20
    distance 1711.098903954062
  ]
  edge [
    source 9
    target 21
    distance 1984.8536024009782
  ]
  edge [
    source 10
    target 11
    distance 1540.5614639865635
  ]
  edge [
    source 10
    target 12
    distance 1639.5596537580507
  ]
  edge [
    source 10
    target 13
    distance 1625.6378197224897
  ]
  edge [
    source 10
    target 14
    distance 2547.459727394119
  ]
  edge [
    source 10
    target 15
    distance 2059.2991907125893
  ]
  edge [
    source 10
    target 16
    distance 1585.7445695464446
  ]
  edge [
    source 10
    target 17
    distance 3982.773651282129
  ]
  edge [
    source 10
    target 18
    distance 2245.1636215237518
  ]
  edge [
    source 10
    target 19
    distance 676.116239048576
  ]
  edge [
    source 10
    target 20
    distance 745.8894162903507
  ]
  edge [
    source 10
    target 21
    distance 1115.7884411086127
  ]
  edge [
    source 11
    target 12
    distance 532.5046492455209
  ]
  edge [
    source 11
    target 13
    distance 530.9552975012575
  ]
  edge [
    source 11
    target 14
    distance 4088.0185200134483
  ]
  edge [
    source 11
    target 15
    distance 3528.5512489836347
  ]
  edge [
    source 11
    target 16
    distance 628.8868090926171
  ]
  edge [
    source 11
    target 17
    distance 4066.8742995710977
  ]
  edge [
    source 11
    target 18
    distance 3681.818892004956
  ]
  edge [
    source 11
    target 19
    distance 1103.625574396113
  ]
  edge [
    source 11
    target 20
    distance 1567.8767004208387
  ]
  edge [
    source 11
    target 21
    distance 502.10702739918554
  ]
  edge [
    source 12
    target 13
    distance 14.28298085571759
  ]
  edge [
    source 12
    target 14
    distance 4130.342330171592
  ]
  edge [
    source 12
    target 15
    distance 3450.948449450713
  ]
  edge [
    source 12
    target 16
    distance 129.60181091014726
  ]
  edge [
    source 12
    target 17
    distance 3551.9498077139133
  ]
  edge [
    source 12
    target 18
    distance 3875.4948371372443
  ]
  edge [
    source 12
    target 19
    distance 1031.8167824704196
  ]
  edge [
    source 12
    target 20
    distance 1409.3111754616864
  ]
  edge [
    source 12
    target 21
    distance 551.2472669034609
  ]
  edge [
    source 13
    target 14
    distance 4116.060531536337
  ]
  edge [
    source 13
    target 15
    distance 3436.9510822174125
  ]
  edge [
    source 13
    target 16
    distance 121.03515994764935
  ]
  edge [
    source 13
    target 17
    distance 3549.812782139037
  ]
  edge [
    source 13
    target 18
    distance 3861.882862362753
  ]
  edge [
    source 13
    target 19
    distance 1017.5340177970777
  ]
  edge [
    source 13
    target 20
    distance 1395.4801875487535
  ]
  edge [
    source 13
    target 21
    distance 538.6521140560918
  ]
  edge [
    source 14
    target 15
    distance 1016.5768423934534
  ]
  edge [
    source 14
    target 16
    distance 4050.4127576770543
  ]
  edge [
    source 14
    target 17
    distance 4879.982055005485
  ]
  edge [
    source 14
    target 18
    distance 1128.6414997167851
  ]
  edge [
    source 14
    target 19
    distance 3098.748053362622
  ]
  edge [
    source 14
    target 20
    distance 2790.715010529249
  ]
  edge [
    source 14
    target 21
    distance 3646.790295998918
  ]
  edge [
    source 15
    target 16
    distance 3351.2980418885686
  ]
  edge [
    source 15
    target 17
    distance 3869.7889412551444
  ]
  edge [
    source 15
    target 18
    distance 1792.4551315925862
  ]
  edge [
    source 15
    target 19
    distance 2445.930566333144
  ]
  edge [
    source 15
    target 20
    distance 2044.615927286498
  ]
  edge [
    source 15
    target 21
    distance 3042.0793206423627
  ]
  edge [
    source 16
    target 17
    distance 3441.1010732297186
  ]
  edge [
    source 16
    target 18
    distance 3828.9753379488566
  ]
  edge [
    source 16
    target 19
    distance 954.1399748706126
  ]
  edge [
    source 16
    target 20
    distance 1306.926748813664
  ]
  edge [
    source 16
    target 21
    distance 540.1880764367846
  ]
  edge [
    source 17
    target 18
    distance 5503.000819835471
  ]
  edge [
    source 17
    target 19
    distance 3524.5060019514344
  ]
  edge [
    source 17
    target 20
    distance 3240.4260983830977
  ]
  edge [
    source 17
    target 21
    distance 3764.4828124268442
  ]
  edge [
    source 18
    target 19
    distance 2908.9436973729844
  ]
  edge [
    source 18
    target 20
    distance 2769.8378097834106
  ]
  edge [
    source 18
    target 21
    distance 3334.173566478462
  ]
  edge [
    source 19
    target 20
    distance 478.2347295242777
  ]
  edge [
    source 19
    target 21
    distance 603.6803918514454
  ]
  edge [
    source 20
    target 21
    distance 1065.9046974441303
  ]
]
