graph [
  node [
    id 0
    label "Virginia"
  ]
  node [
    id 1
    label "California"
  ]
  node [
    id 2
    label "Oregon"
  ]
  node [
    id 3
    label "Dublin"
  ]
  node [
    id 4
    label "Frankfurt"
  ]
  node [
    id 5
    label "Tokyo"
  ]
  node [
    id 6
    label "Seoul"
  ]
  node [
    id 7
    label "Singapore"
  ]
  node [
    id 8
    label "Sydney"
  ]
  node [
    id 9
    label "Mumbai"
  ]
  node [
    id 10
    label "Sao Paulo"
  ]
  edge [
    source 0
    target 1
    distance 3560.859824767453
    capacity 1000000000.0
  ]
  edge [
    source 0
    target 2
    distance 3617.1058525455455
    capacity 1000000000.0
  ]
  edge [
    source 0
    target 3
    distance 5683.746538162422
    capacity 100000000.0
  ]
  edge [
    source 0
    target 4
    distance 6774.62010172149
    capacity 100000000.0
  ]
  edge [
    source 0
    target 5
    distance 11032.403521116341
    capacity 100000000.0
  ]
  edge [
    source 0
    target 6
    distance 11331.528778910633
    capacity 100000000.0
  ]
  edge [
    source 0
    target 7
    distance 15737.083172377323
    capacity 100000000.0
  ]
  edge [
    source 0
    target 8
    distance 15550.74835546916
    capacity 100000000.0
  ]
  edge [
    source 0
    target 9
    distance 13113.161300492078
    capacity 100000000.0
  ]
  edge [
    source 0
    target 10
    distance 7500.898168816753
    capacity 500000000.0
  ]
  edge [
    source 1
    target 2
    distance 825.4130940774442
    capacity 1500000000.0
  ]
  edge [
    source 1
    target 3
    distance 8111.218768362535
    capacity 100000000.0
  ]
  edge [
    source 1
    target 4
    distance 9096.865584257743
    capacity 100000000.0
  ]
  edge [
    source 1
    target 5
    distance 8620.547632468602
    capacity 100000000.0
  ]
  edge [
    source 1
    target 6
    distance 9370.063077937788
    capacity 300000000.0
  ]
  edge [
    source 1
    target 7
    distance 13930.612571776204
    capacity 100000000.0
  ]
  edge [
    source 1
    target 8
    distance 12160.544494528913
    capacity 300000000.0
  ]
  edge [
    source 1
    target 9
    distance 13727.28776621854
    capacity 100000000.0
  ]
  edge [
    source 1
    target 10
    distance 10079.072989313954
    capacity 100000000.0
  ]
  edge [
    source 2
    target 3
    distance 7551.970732123231
    capacity 300000000.0
  ]
  edge [
    source 2
    target 4
    distance 8488.896086335717
    capacity 100000000.0
  ]
  edge [
    source 2
    target 5
    distance 8028.469388699873
    capacity 100000000.0
  ]
  edge [
    source 2
    target 6
    distance 8700.031091458462
    capacity 300000000.0
  ]
  edge [
    source 2
    target 7
    distance 13325.366070623815
    capacity 100000000.0
  ]
  edge [
    source 2
    target 8
    distance 12383.076161347562
    capacity 100000000.0
  ]
  edge [
    source 2
    target 9
    distance 12902.319229980723
    capacity 100000000.0
  ]
  edge [
    source 2
    target 10
    distance 10610.577959918295
    capacity 100000000.0
  ]
  edge [
    source 3
    target 4
    distance 1091.0035398064083
    capacity 1500000000.0
  ]
  edge [
    source 3
    target 5
    distance 9611.133798789571
    capacity 100000000.0
  ]
  edge [
    source 3
    target 6
    distance 8974.589549377932
    capacity 100000000.0
  ]
  edge [
    source 3
    target 7
    distance 11203.776982156216
    capacity 100000000.0
  ]
  edge [
    source 3
    target 8
    distance 17207.312372624874
    capacity 100000000.0
  ]
  edge [
    source 3
    target 9
    distance 7620.843594967312
    capacity 300000000.0
  ]
  edge [
    source 3
    target 10
    distance 9366.555606476215
    capacity 100000000.0
  ]
  edge [
    source 4
    target 5
    distance 9358.521215366647
    capacity 100000000.0
  ]
  edge [
    source 4
    target 6
    distance 8571.5714609335
    capacity 100000000.0
  ]
  edge [
    source 4
    target 7
    distance 10260.83044153216
    capacity 100000000.0
  ]
  edge [
    source 4
    target 8
    distance 16478.1341044152
    capacity 100000000.0
  ]
  edge [
    source 4
    target 9
    distance 6578.168093870104
    capacity 500000000.0
  ]
  edge [
    source 4
    target 10
    distance 9807.409376220698
    capacity 100000000.0
  ]
  edge [
    source 5
    target 6
    distance 1161.2277477992284
    capacity 1000000000.0
  ]
  edge [
    source 5
    target 7
    distance 5311.118309037953
    capacity 1000000000.0
  ]
  edge [
    source 5
    target 8
    distance 7789.739742827469
    capacity 300000000.0
  ]
  edge [
    source 5
    target 9
    distance 6751.3514540143415
    capacity 300000000.0
  ]
  edge [
    source 5
    target 10
    distance 18528.65557840507
    capacity 100000000.0
  ]
  edge [
    source 6
    target 7
    distance 4658.7421490548095
    capacity 1000000000.0
  ]
  edge [
    source 6
    target 8
    distance 8296.033168577038
    capacity 100000000.0
  ]
  edge [
    source 6
    target 9
    distance 5613.893433078432
    capacity 500000000.0
  ]
  edge [
    source 6
    target 10
    distance 18337.930813275976
    capacity 100000000.0
  ]
  edge [
    source 7
    target 8
    distance 6301.111688839916
    capacity 300000000.0
  ]
  edge [
    source 7
    target 9
    distance 3899.1833741194805
    capacity 500000000.0
  ]
  edge [
    source 7
    target 10
    distance 16000.059238393498
    capacity 100000000.0
  ]
  edge [
    source 8
    target 9
    distance 10144.778814121693
    capacity 100000000.0
  ]
  edge [
    source 8
    target 10
    distance 13377.864263189238
    capacity 100000000.0
  ]
  edge [
    source 9
    target 10
    distance 13772.602629233716
    capacity 100000000.0
  ]
]
